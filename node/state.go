package node

import (
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

// Keys of the records in the state log, each followed by a slot number.
const (
	fencePrefix  = "fence/"  // "version [move_id]"
	dropPrefix   = "drop/"   // "bytes_per_second"
	importPrefix = "import/" // ImportState as JSON
)

func slotKey(prefix string, s slots.Slot) string { return prefix + strconv.Itoa(s.Int()) }

// nodeState is what a node keeps across restarts besides its change logs.
type nodeState struct {
	log     *stateLog
	fences  map[slots.Slot]FenceInfo
	drops   map[slots.Slot]int64
	imports map[slots.Slot]*ImportState
}

// loadState opens the state log in dir and decodes it. State files of
// earlier versions (a file each for fences, drops and every import) are
// moved into the log first, then removed.
func loadState(dir string) (*nodeState, error) {
	l, err := openStateLog(dir)
	if err != nil {
		return nil, err
	}
	var st *nodeState
	err = migrateStateFiles(dir, l)
	if err == nil {
		st, err = decodeState(dir, l)
	}
	if err != nil {
		l.close()
		return nil, err
	}
	return st, nil
}

func decodeState(dir string, l *stateLog) (*nodeState, error) {
	st := &nodeState{log: l, fences: map[slots.Slot]FenceInfo{}, drops: map[slots.Slot]int64{}, imports: map[slots.Slot]*ImportState{}}
	for key, value := range l.snapshot() {
		prefix, num, _ := strings.Cut(key, "/")
		n, err := strconv.Atoi(num)
		var s slots.Slot
		if err == nil {
			s, err = slots.New(n)
		}
		bad := func(err error) error {
			return fmt.Errorf("node: state log %s: record %q is corrupt (%v); restore the file, or remove it knowing that fenced slots may then accept writes", filepath.Join(dir, stateLogFile), key, err)
		}
		if err != nil {
			return nil, bad(err)
		}
		switch prefix + "/" {
		case fencePrefix:
			v, id, _ := strings.Cut(value, " ")
			ver, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, bad(err)
			}
			st.fences[s] = FenceInfo{Version: ver, MoveID: id}
		case dropPrefix:
			r, err := strconv.ParseInt(value, 10, 64)
			if err != nil || r <= 0 {
				return nil, bad(fmt.Errorf("rate %q", value))
			}
			st.drops[s] = r
		case importPrefix:
			var imp ImportState
			if err := json.Unmarshal([]byte(value), &imp); err != nil {
				return nil, bad(err)
			}
			st.imports[s] = &imp
		default:
			return nil, bad(errors.New("unknown kind"))
		}
	}
	return st, nil
}

// migrateStateFiles moves the state files of earlier versions into l.
func migrateStateFiles(dir string, l *stateLog) error {
	fences, err := loadFences(dir)
	if err != nil {
		return err
	}
	drops, err := loadDrops(dir)
	if err != nil {
		return err
	}
	imports, err := loadImports(dir)
	if err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "import-*.json"))
	for _, name := range []string{fenceFile, dropFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			old = append(old, filepath.Join(dir, name))
		}
	}
	if len(old) == 0 {
		return nil
	}
	for s, fi := range fences {
		if err := l.set(slotKey(fencePrefix, s), fenceValue(fi), false); err != nil {
			return err
		}
	}
	for s, r := range drops {
		if err := l.set(slotKey(dropPrefix, s), strconv.FormatInt(r, 10), false); err != nil {
			return err
		}
	}
	for s, imp := range imports {
		b, err := json.Marshal(imp)
		if err != nil {
			return fmt.Errorf("node: encode import state: %w", err)
		}
		if err := l.set(slotKey(importPrefix, s), string(b), false); err != nil {
			return err
		}
	}
	if err := l.sync(); err != nil {
		return err
	}
	for _, name := range old {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("node: remove migrated state file: %w", err)
		}
	}
	return syncDir(dir)
}

func fenceValue(fi FenceInfo) string {
	v := strconv.FormatUint(fi.Version, 10)
	if fi.MoveID != "" {
		v += " " + fi.MoveID
	}
	return v
}
