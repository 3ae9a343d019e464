package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/slotd/slotd/slots"
)

// The state files of earlier versions, one per kind, which the state log
// (statelog.go) replaced: migrateStateFiles (state.go) reads them once to
// move them into the log.

// fenceFile is the name, inside Config.StateDir, of the file that held the
// fenced slots, one "slot version move_id" line each, before the state log
// (statelog.go); it is read once to move it into the log.
const fenceFile = "fences"

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

// dropFile held the drops in progress, one "slot bytes_per_second" line
// each, before the state log; it is read once to move it into the log.
const dropFile = "drops"

func loadDrops(dir string) (map[slots.Slot]int64, error) {
	out := make(map[slots.Slot]int64)
	b, err := os.ReadFile(filepath.Join(dir, dropFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: read drops: %w", err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var k int
		var r int64
		var s slots.Slot
		if len(f) == 2 {
			k, err = strconv.Atoi(f[0])
			if err == nil {
				r, err = strconv.ParseInt(f[1], 10, 64)
			}
			if err == nil {
				s, err = slots.New(k)
			}
		}
		if len(f) != 2 || err != nil || r <= 0 {
			return nil, fmt.Errorf("node: drop file %s line %d is corrupt; remove it and drop the slots again", filepath.Join(dir, dropFile), i+1)
		}
		out[s] = r
	}
	return out, nil
}

func loadImports(dir string) (map[slots.Slot]*ImportState, error) {
	names, err := filepath.Glob(filepath.Join(dir, "import-*.json"))
	if err != nil {
		return nil, fmt.Errorf("node: list imports: %w", err)
	}
	out := make(map[slots.Slot]*ImportState)
	for _, name := range names {
		num := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "import-"), ".json")
		k, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		s, err := slots.New(k)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("node: read import state: %w", err)
		}
		var st ImportState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("node: import state %s is corrupt (drop the slot's partial copy and remove it): %w", name, err)
		}
		out[s] = &st
	}
	return out, nil
}
