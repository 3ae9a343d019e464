package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// MinTokenLen is the shortest bearer token a token file may hold, in bytes.
const MinTokenLen = 16

// ErrTokenFile is returned for a token file that cannot be read or parsed.
var ErrTokenFile = errors.New("auth: bad token file")

// tokenEntry is one line of a token file. Only the token's digest is kept,
// so comparisons run over fixed-length values and a heap dump shows no token.
type tokenEntry struct {
	digest [sha256.Size]byte
	roles  RoleSet
	nodes  []string // node:<id> items: the store nodes the token may act as
	name   string
}

// parseTokens reads the token file format:
//
//	# comment
//	<token> <role>[,<role>...][,node:<id>...] [name]
//
// A node:<id> item binds a store token to node <id> (see CheckNode).
// Errors name the line but never echo a token.
func parseTokens(path string, data []byte) ([]tokenEntry, error) {
	var out []tokenEntry
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("%w: %s line %d: want \"token role[,role] [name]\", got %d fields", ErrTokenFile, path, n, len(f))
		}
		if len(f[0]) < MinTokenLen {
			return nil, fmt.Errorf("%w: %s line %d: token is %d bytes, want at least %d random bytes", ErrTokenFile, path, n, len(f[0]), MinTokenLen)
		}
		e := tokenEntry{digest: sha256.Sum256([]byte(f[0]))}
		for _, name := range strings.Split(f[1], ",") {
			if id, ok := strings.CutPrefix(name, "node:"); ok {
				if id == "" || strings.ContainsAny(id, "/ ") {
					return nil, fmt.Errorf("%w: %s line %d: %q is not node:<id>", ErrTokenFile, path, n, name)
				}
				e.nodes = append(e.nodes, id)
				continue
			}
			r, err := ParseRole(name)
			if err != nil {
				return nil, fmt.Errorf("%w: %s line %d: %w", ErrTokenFile, path, n, err)
			}
			e.roles |= r.bit()
		}
		if len(f) == 3 {
			e.name = f[2]
		} else {
			// A short digest prefix names the token in logs without revealing it.
			e.name = "token:" + hex.EncodeToString(e.digest[:4])
		}
		if prev, dup := seen[e.digest]; dup {
			return nil, fmt.Errorf("%w: %s line %d: same token as line %d", ErrTokenFile, path, n, prev)
		}
		seen[e.digest] = n
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTokenFile, path, err)
	}
	return out, nil
}

// tokenFile is a token file re-read on use, at most once per interval, the
// way tlsconf re-reads certificates. A file that fails to parse is logged
// once and the previous tokens stay valid: a typo while editing must not
// lock every operator out.
type tokenFile struct {
	path     string
	interval time.Duration
	lg       *slog.Logger

	mu      sync.Mutex // guards entries, raw, checked, lastErr
	entries []tokenEntry
	raw     []byte
	checked time.Time
	lastErr string
}

func newTokenFile(path string, interval time.Duration, lg *slog.Logger) (*tokenFile, error) {
	f := &tokenFile{path: path, interval: interval, lg: lg}
	if err := f.reload(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		lg.Warn("token file is readable by group or others; chmod 600 it", "file", path, "mode", fi.Mode().Perm())
	}
	return f, nil
}

func (f *tokenFile) reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked()
}

func (f *tokenFile) reloadLocked() error {
	f.checked = time.Now()
	raw, err := os.ReadFile(f.path)
	if err == nil && f.raw != nil && bytes.Equal(raw, f.raw) {
		return nil
	}
	var entries []tokenEntry
	if err == nil {
		entries, err = parseTokens(f.path, raw)
	} else {
		err = fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if err != nil {
		if msg := err.Error(); msg != f.lastErr && f.raw != nil {
			f.lastErr = msg
			f.lg.Warn("token file not reloaded; keeping the previous tokens", "err", err)
		}
		return err
	}
	if f.raw != nil {
		f.lg.Info("token file reloaded", "file", f.path, "tokens", len(entries))
	}
	f.lastErr = ""
	f.raw, f.entries = raw, entries
	return nil
}

// lookup finds the entry for token. Every entry is compared, in constant
// time per entry, so the time taken says nothing about how close a guess was.
func (f *tokenFile) lookup(token string) (tokenEntry, bool) {
	f.mu.Lock()
	if time.Since(f.checked) >= f.interval {
		_ = f.reloadLocked()
	}
	entries := f.entries
	f.mu.Unlock()

	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range entries {
		if subtle.ConstantTimeCompare(d[:], entries[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return tokenEntry{}, false
	}
	return entries[found], true
}
