package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotd/slotd/slots"
)

// Change is one captured write with its sequence number. A capture's
// sequence numbers follow its snapshot sequence without gaps.
type Change struct {
	Seq uint64
	Mutation
}

// A capture records every write to one slot from the moment an export starts
// (the snapshot point), so that a copy taken by scanning the live
// slot can be brought up to date by replaying the changes after it in order.
// Replaying is correct even though the scan saw some of those changes already,
// because every change carries a full value.
//
// The log is an append-only file in the state dir, created with the first
// change, so a capture with changes survives a restart of the source: an export resumed from its cursor plus the changes
// after the last seen sequence still miss nothing. All changes stay in memory
// too; a capture lives only for one move of one slot.
type capture struct {
	id   string // the move id
	base uint64 // snapshot sequence: the first change is base+1
	slot slots.Slot
	path string
	sync bool

	mu      sync.Mutex // guards everything below
	f       *os.File
	changes []Change      // changes[i].Seq == base+i+1
	wake    chan struct{} // closed and replaced on every append, fence and end
	ended   bool          // by end (the log is gone) or close (the log stays)
	closed  bool
	fenced  uint64 // fence sequence while the slot is fenced, else 0
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	recHeader = 0xFF // first record of a file: its key holds the capture id
	recPut    = 0
	recDelete = 1
	maxRecord = 1 << 30
)

func capturePath(dir string, s slots.Slot) string {
	return filepath.Join(dir, "capture-"+strconv.Itoa(s.Int())+".log")
}

// createCapture starts a new, empty capture for slot s whose first change
// will have sequence base+1. Callers pick base above every sequence an older
// capture of the slot handed out, so that a target that remembers the last
// change it applied never skips a change of a newer capture.
func createCapture(dir string, s slots.Slot, moveID string, base uint64, sync bool) (*capture, error) {
	c := &capture{id: moveID, base: base, slot: s, path: capturePath(dir, s), sync: sync, wake: make(chan struct{})}
	// An ended capture whose removal was interrupted must not be loaded as
	// this one's log after a restart.
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("node: start capture of slot %d: %w", s.Int(), err)
	}
	return c, nil
}

// openLog creates the capture's log file, on the first change: most slots
// of a rebalance see no write while they move, and creating and removing a
// file for each cost a quarter of a rebalance's CPU on ext4. A capture
// without a log that is lost in a restart is not silently wrong: the
// mover's next Changes call finds no capture (ErrCaptureLost) and the move
// restarts. With sync on, the header and the directory entry are synced
// with the first change, before the write is acknowledged.
func (c *capture) openLog() error {
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("node: create change log of slot %d: %w", c.slot.Int(), err)
	}
	hdr := appendRecord(nil, c.base, recHeader, []byte(c.id), nil)
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return fmt.Errorf("node: create change log of slot %d: %w", c.slot.Int(), err)
	}
	if c.sync {
		if err := syncDir(filepath.Dir(c.path)); err != nil {
			f.Close()
			return err
		}
	}
	c.f = f
	return nil
}

// loadCaptures opens every capture log in dir. A torn record at the end of a
// log (a crash in the middle of an append) is cut off: its write was never
// acknowledged.
func loadCaptures(dir string, sync bool) (map[slots.Slot]*capture, error) {
	names, err := filepath.Glob(filepath.Join(dir, "capture-*.log"))
	if err != nil {
		return nil, fmt.Errorf("node: list captures: %w", err)
	}
	out := make(map[slots.Slot]*capture)
	for _, name := range names {
		num := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "capture-"), ".log")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue // not ours
		}
		s, err := slots.New(n)
		if err != nil {
			continue
		}
		c, err := openCapture(name, s, sync)
		if err != nil {
			for _, o := range out {
				o.close()
			}
			return nil, err
		}
		out[s] = c
	}
	return out, nil
}

func openCapture(path string, s slots.Slot, sync bool) (*capture, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node: open capture: %w", err)
	}
	c := &capture{slot: s, path: path, sync: sync, wake: make(chan struct{}), f: f}
	r := bufio.NewReader(f)
	var good int64
	for {
		seq, kind, key, val, n, err := readRecord(r)
		if err != nil {
			break // io.EOF, or a torn tail
		}
		if good == 0 {
			if kind != recHeader {
				f.Close()
				return nil, fmt.Errorf("node: capture log %s has no header; remove it and restart the move", path)
			}
			c.id, c.base = string(key), seq
		} else {
			if seq != c.base+uint64(len(c.changes))+1 {
				break // out of order can only be a torn tail
			}
			c.changes = append(c.changes, Change{Seq: seq, Mutation: Mutation{Key: key, Value: val, Delete: kind == recDelete}})
		}
		good += int64(n)
	}
	if good == 0 {
		f.Close()
		return nil, fmt.Errorf("node: capture log %s is empty or corrupt; remove it and restart the move", path)
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("node: trim capture log: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("node: open capture: %w", err)
	}
	return c, nil
}

// record: u32 length of payload | u32 crc32c(payload) | payload
// payload: u64 seq | u8 kind | uvarint len(key) | key | value
func appendRecord(buf []byte, seq uint64, kind byte, key, val []byte) []byte {
	var p []byte
	p = binary.BigEndian.AppendUint64(p, seq)
	p = append(p, kind)
	p = binary.AppendUvarint(p, uint64(len(key)))
	p = append(p, key...)
	p = append(p, val...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(p)))
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(p, castagnoli))
	return append(buf, p...)
}

var errBadRecord = errors.New("node: bad capture record")

func readRecord(r io.Reader) (seq uint64, kind byte, key, val []byte, n int, err error) {
	var hdr [8]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, nil, 0, err
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size < 10 || size > maxRecord {
		return 0, 0, nil, nil, 0, errBadRecord
	}
	p := make([]byte, size)
	if _, err = io.ReadFull(r, p); err != nil {
		return 0, 0, nil, nil, 0, err
	}
	if crc32.Checksum(p, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
		return 0, 0, nil, nil, 0, errBadRecord
	}
	seq = binary.BigEndian.Uint64(p)
	kind = p[8]
	klen, k := binary.Uvarint(p[9:])
	if k <= 0 || uint64(len(p)-9-k) < klen {
		return 0, 0, nil, nil, 0, errBadRecord
	}
	key = p[9+k : 9+k+int(klen)]
	val = p[9+k+int(klen):]
	return seq, kind, key, val, 8 + int(size), nil
}

// append logs a batch that the store has applied. The caller holds the slot's
// write lock, so changes are logged in the order the store applied them.
func (c *capture) append(batch []Mutation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed // the write must not be acknowledged unlogged
	}
	if c.ended {
		return nil
	}
	if c.f == nil {
		if err := c.openLog(); err != nil {
			return err
		}
	}
	next := c.base + uint64(len(c.changes)) + 1
	var buf []byte
	for i, m := range batch {
		kind := byte(recPut)
		if m.Delete {
			kind = recDelete
		}
		buf = appendRecord(buf, next+uint64(i), kind, m.Key, m.Value)
	}
	if _, err := c.f.Write(buf); err != nil {
		return fmt.Errorf("node: log change of slot %d: %w", c.slot.Int(), err)
	}
	if c.sync {
		if err := c.f.Sync(); err != nil {
			return fmt.Errorf("node: sync change log of slot %d: %w", c.slot.Int(), err)
		}
	}
	for i, m := range batch {
		m.Key = append([]byte(nil), m.Key...)
		m.Value = append([]byte(nil), m.Value...)
		c.changes = append(c.changes, Change{Seq: next + uint64(i), Mutation: m})
	}
	close(c.wake)
	c.wake = make(chan struct{})
	return nil
}

// last returns the sequence number of the newest change (base if none).
func (c *capture) last() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base + uint64(len(c.changes))
}

// setFence records that the slot is fenced at the capture's current last
// sequence (0 to lift it) and wakes followers so they can finish.
func (c *capture) setFence(on bool) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fenced = 0
	if on {
		c.fenced = c.base + uint64(len(c.changes))
	}
	if !c.ended {
		close(c.wake)
		c.wake = make(chan struct{})
	}
	return c.fenced
}

// since returns the changes after sequence after whose keys and values add
// up to about maxBytes (at least one if any), the newest sequence and the
// fence sequence. The returned changes are shared: do not modify.
func (c *capture) since(after uint64, maxBytes int) (out []Change, high, fence uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil, 0, 0, ErrCaptureLost
	}
	high = c.base + uint64(len(c.changes))
	if after < c.base || after > high {
		return nil, 0, 0, fmt.Errorf("%w: changes after %d asked, slot %d has %d-%d", ErrCaptureLost, after, c.slot.Int(), c.base, high)
	}
	rest := c.changes[after-c.base:]
	size, n := 0, 0
	for n < len(rest) && (n == 0 || size < maxBytes) {
		size += len(rest[n].Key) + len(rest[n].Value) + 16
		n++
	}
	return rest[:n], high, c.fenced, nil
}

// wait blocks until a change after seq exists, the slot is fenced with no
// change after seq left, the capture ends or ctx is done.
func (c *capture) wait(ctx context.Context, after uint64) error {
	for {
		c.mu.Lock()
		if c.ended {
			c.mu.Unlock()
			return ErrCaptureLost
		}
		if c.base+uint64(len(c.changes)) > after || c.fenced != 0 {
			c.mu.Unlock()
			return nil
		}
		ch := c.wake
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// end stops the capture and removes its log.
func (c *capture) end() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil
	}
	c.ended = true
	close(c.wake)
	c.changes = nil
	var err error
	if c.f != nil {
		err = c.f.Close()
		if rerr := os.Remove(c.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("node: end capture of slot %d: %w", c.slot.Int(), err)
	}
	return nil
}

// close releases the file but keeps the log for the next start.
func (c *capture) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil
	}
	c.ended, c.closed = true, true
	close(c.wake)
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

func (n *Node) captureOf(s slots.Slot) *capture {
	n.capMu.Lock()
	defer n.capMu.Unlock()
	return n.captures[s]
}

// StartCapture starts recording the writes to slot s for move moveID,
// replacing any capture that runs, and returns the snapshot sequence:
// changes after it, replayed on top of a scan started after this call, give
// the slot's current state. Sequence numbers grow across captures of a slot.
func (n *Node) StartCapture(ctx context.Context, s slots.Slot, moveID string) (snapshotSeq uint64, err error) {
	if n.closed.Load() {
		return 0, ErrClosed
	}
	// Below, the import progress of an owned slot may go: the takeover
	// must have seen the slot arrive with it first (takeover.go).
	n.lookAtMap()
	// Take the slot lock so no write is half-way between Apply and the log.
	mu := &n.slotMu[s.Int()]
	mu.Lock()
	defer mu.Unlock()
	n.capMu.Lock()
	defer n.capMu.Unlock()
	// Wall-clock nanoseconds keep sequences growing across captures even
	// when the old capture's log is gone; the old last sequence covers a
	// clock that went back.
	base := uint64(time.Now().UnixNano())
	if old, ok := n.captures[s]; ok {
		base = max(base, old.last()+1)
		delete(n.captures, s)
		if err := old.end(); err != nil {
			return 0, err
		}
	}
	c, err := createCapture(n.cfg.StateDir, s, moveID, base, !n.cfg.NoSync)
	if err != nil {
		return 0, err
	}
	// A node exporting a slot it owns received it, if at all, by a move
	// that is over: that import's state must go, or the drop that follows
	// this move would be taken for the late drop of an older move and
	// refused (see Drop), leaving the handed-off copy on disk for good.
	if o, ok := n.cfg.Map.Owner(s); ok && o.ID == n.cfg.ID {
		n.impMu.Lock()
		_, had := n.imports[s]
		delete(n.imports, s)
		n.impMu.Unlock()
		if had {
			if err := n.state.delete(slotKey(importPrefix, s), !n.cfg.NoSync); err != nil {
				c.end()
				return 0, err
			}
		}
	}
	if n.Fenced(s) {
		c.setFence(true)
	}
	n.captures[s] = c
	n.lg.Info("capture started", "slot", s.Int(), "move", moveID, "snapshot_seq", base)
	return base, nil
}

// EndCapture stops the capture of slot s and deletes its log. An empty
// moveID ends whatever capture runs; ending no capture is a no-op.
func (n *Node) EndCapture(ctx context.Context, s slots.Slot, moveID string) error {
	n.capMu.Lock()
	c, ok := n.captures[s]
	if !ok || (moveID != "" && c.id != moveID) {
		n.capMu.Unlock()
		return nil
	}
	delete(n.captures, s)
	n.capMu.Unlock()
	n.lg.Info("capture ended", "slot", s.Int(), "move", c.id)
	return c.end()
}

// findCapture returns the capture of slot s for moveID: ErrCaptureLost when
// none runs, ErrMoveMismatch when another move's does.
func (n *Node) findCapture(s slots.Slot, moveID string) (*capture, error) {
	c := n.captureOf(s)
	if c == nil {
		return nil, fmt.Errorf("%w: no capture of slot %d", ErrCaptureLost, s.Int())
	}
	if moveID != "" && c.id != moveID {
		return nil, fmt.Errorf("%w: slot %d is captured for move %q, not %q", ErrMoveMismatch, s.Int(), c.id, moveID)
	}
	return c, nil
}

// ChangeBatch is a run of captured changes.
type ChangeBatch struct {
	Changes  []Change // shared with the capture: do not modify
	HighSeq  uint64   // newest sequence captured when the batch was taken
	FenceSeq uint64   // non-zero once the slot is fenced
}

// Changes returns the changes of slot s's capture for moveID after sequence
// after, about maxBytes of them (0: 256 KiB; at most 2 MiB), counted against
// the export throttle. With wait set it blocks until there is a change or the slot is
// fenced (then the batch may be empty), or ctx is done. It returns
// ErrCaptureLost when the capture or those changes are gone.
func (n *Node) Changes(ctx context.Context, s slots.Slot, moveID string, after uint64, maxBytes int, wait bool) (ChangeBatch, error) {
	c, err := n.findCapture(s, moveID)
	if err != nil {
		return ChangeBatch{}, err
	}
	maxBytes = n.throttledBatch(batchBytes(maxBytes))
	if wait {
		if err := c.wait(ctx, after); err != nil {
			return ChangeBatch{}, err
		}
	}
	out, high, fence, err := c.since(after, maxBytes)
	if err != nil {
		return ChangeBatch{}, err
	}
	size := 0
	for _, ch := range out {
		size += len(ch.Key) + len(ch.Value)
	}
	if err := n.throttle.Wait(ctx, size); err != nil {
		return ChangeBatch{}, err
	}
	n.m.exportBytes.Add(float64(size))
	return ChangeBatch{Changes: out, HighSeq: high, FenceSeq: fence}, nil
}
