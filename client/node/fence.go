package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/slotd/slotd/slots"
)

// fenceFile is the name, inside Config.StateDir, of the file that held the
// fenced slots, one "slot version move_id" line each, before the state log
// (statelog.go); it is read once to move it into the log.
const fenceFile = "fences"

// FenceInfo says why a slot is fenced.
type FenceInfo struct {
	Version uint64 // directory version the mover acted at
	MoveID  string
}

// loadFences reads the persisted fences; a missing file is no fence.
func loadFences(dir string) (map[slots.Slot]FenceInfo, error) {
	path := filepath.Join(dir, fenceFile)
	b, err := os.ReadFile(path)
	out := make(map[slots.Slot]FenceInfo)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read fences: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("node: fence file %s line %d is corrupt; fix or remove it knowing the slot may accept writes", path, line)
		}
		n, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseUint(f[1], 10, 64)
		s, err3 := slots.New(n)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("node: fence file %s line %d is corrupt: %w", path, line, err)
		}
		fi := FenceInfo{Version: v}
		if len(f) == 3 {
			fi.MoveID = f[2]
		}
		out[s] = fi
	}
	return out, nil
}

func writeFileAtomic(dir, name string, data []byte, sync bool) error {
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("node: write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("node: write %s: %w", name, err)
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("node: sync %s: %w", name, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("node: write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("node: replace %s: %w", name, err)
	}
	if !sync {
		return nil
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("node: open state dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("node: sync state dir: %w", err)
	}
	return nil
}
