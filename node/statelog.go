package node

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// stateLogFile is the name, inside Config.StateDir, of the node's small
// persistent state: fences, drops in progress and import progress, as one
// append-only file of records. A change is one appended line (and one
// fdatasync when it must survive a power loss), not a rewrite of a file
// through a temporary file, a rename and two fsyncs: on ext4 that was
// about a third of the CPU of a rebalance of thousands of small slots
// (go test -bench Rebalance3to4 -cpuprofile ./mover). The file is
// rewritten, compacted, when dead records outnumber live ones.
//
// A line is "<crc32c hex> <key> [<value>]\n" (no value: the key was
// deleted), the checksum over everything after the first space. A last
// line cut short by a crash was never acknowledged and is cut off; a bad
// line before the end is corruption and stops the node from starting.
const stateLogFile = "state.log"

// stateLog is safe for concurrent use.
type stateLog struct {
	mu      sync.Mutex
	dir     string
	f       *os.File
	live    map[string]string
	records int // lines in the file
}

// openStateLog replays the log in dir (creating it if missing) and returns
// it with its live records.
func openStateLog(dir string) (*stateLog, error) {
	path := filepath.Join(dir, stateLogFile)
	l := &stateLog{dir: dir, live: map[string]string{}}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("node: read state log: %w", err)
	}
	good := 0 // bytes of whole, valid lines
	for line := 1; good < len(b); line++ {
		end := bytes.IndexByte(b[good:], '\n')
		if end < 0 {
			break // a torn last append: never acknowledged
		}
		text := string(b[good : good+end])
		key, value, del, err := parseStateLine(text)
		if err != nil {
			return nil, fmt.Errorf("node: state log %s line %d is corrupt (%v); restore it, or remove it knowing that fenced slots may then accept writes", path, line, err)
		}
		if del {
			delete(l.live, key)
		} else {
			l.live[key] = value
		}
		l.records++
		good += end + 1
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node: open state log: %w", err)
	}
	if b == nil {
		// A new file: its directory entry must be durable before any
		// record in it is reported durable.
		if err := syncDir(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	if good < len(b) {
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, fmt.Errorf("node: cut the torn end of the state log: %w", err)
		}
	}
	l.f = f
	return l, nil
}

func parseStateLine(text string) (key, value string, del bool, err error) {
	sum, rest, ok := strings.Cut(text, " ")
	if !ok {
		return "", "", false, errors.New("no checksum")
	}
	want, err := strconv.ParseUint(sum, 16, 32)
	if err != nil || len(sum) != 8 {
		return "", "", false, errors.New("bad checksum field")
	}
	if crc32.Checksum([]byte(rest), castagnoli) != uint32(want) {
		return "", "", false, errors.New("checksum mismatch")
	}
	key, value, ok = strings.Cut(rest, " ")
	if key == "" {
		return "", "", false, errors.New("empty key")
	}
	return key, value, !ok, nil
}

func appendStateLine(b []byte, key, value string, del bool) []byte {
	rest := key
	if !del {
		rest += " " + value
	}
	b = fmt.Appendf(b, "%08x %s\n", crc32.Checksum([]byte(rest), castagnoli), rest)
	return b
}

// snapshot returns the live records.
func (l *stateLog) snapshot() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.live)
}

// set records key = value, durably before it returns when sync is set.
func (l *stateLog) set(key, value string, sync bool) error {
	if strings.ContainsAny(key, " \n") || key == "" || strings.Contains(value, "\n") {
		return fmt.Errorf("node: state record %q cannot be stored (spaces or newlines)", key)
	}
	return l.write(key, value, false, sync)
}

// delete forgets key.
func (l *stateLog) delete(key string, sync bool) error {
	return l.write(key, "", true, sync)
}

func (l *stateLog) write(key, value string, del bool, sync bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("node: state log closed")
	}
	if _, err := l.f.Write(appendStateLine(nil, key, value, del)); err != nil {
		return fmt.Errorf("node: append to state log: %w", err)
	}
	if sync {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("node: sync state log: %w", err)
		}
	}
	if del {
		delete(l.live, key)
	} else {
		l.live[key] = value
	}
	l.records++
	if l.records > 2*len(l.live)+256 {
		if err := l.compactLocked(); err != nil {
			// The appended record stands; compaction is retried later.
			return nil
		}
	}
	return nil
}

// compactLocked rewrites the file with the live records only.
func (l *stateLog) compactLocked() error {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(l.live)) {
		b = appendStateLine(b, k, l.live[k], false)
	}
	if err := writeFileAtomic(l.dir, stateLogFile, b, true); err != nil {
		return err
	}
	l.f.Close()
	f, err := os.OpenFile(filepath.Join(l.dir, stateLogFile), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		// The compacted file holds every record; later writes fail loudly
		// rather than go to the replaced file.
		l.f = nil
		return fmt.Errorf("node: reopen state log: %w", err)
	}
	l.f = f
	l.records = len(l.live)
	return nil
}

// sync makes every record written so far durable.
func (l *stateLog) sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("node: state log closed")
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("node: sync state log: %w", err)
	}
	return nil
}

func (l *stateLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
