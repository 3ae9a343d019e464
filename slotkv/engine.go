package slotkv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

var (
	// ErrEmptyKey is returned for a request with an empty key.
	ErrEmptyKey = errors.New("slotkv: key must not be empty")
	// ErrTooLarge is returned for a key over MaxKeyBytes or a value over
	// MaxValueBytes.
	ErrTooLarge = errors.New("slotkv: key or value too large")
	// ErrCorrupt is returned when a stored value is too short to hold its
	// version: the data file was changed by something else.
	ErrCorrupt = errors.New("slotkv: stored value is corrupt")
)

// Size limits. They keep any one entry, with its framing, well inside
// gRPC's default 4 MiB message limit, so that every stored entry can be
// exported in a batch.
const (
	MaxKeyBytes   = 16 << 10
	MaxValueBytes = 1 << 20
)

// dataBucket holds every key as 2-byte big-endian slot || user key, so that
// one slot is one contiguous range and a slot scan is one cursor walk.
// A value is 8-byte big-endian version || user value: the version travels
// with the value when a slot is copied, so a copy is byte-for-byte equal.
var dataBucket = []byte("data")

// EngineOptions configures an Engine.
type EngineOptions struct {
	// NoSync skips the fsync at each commit. Default false: a write is on
	// disk before it is acknowledged. With NoSync a process crash loses
	// nothing (the page cache survives) but a machine crash can lose the
	// last writes.
	NoSync bool
	// PageSize is the bbolt page size of a new data file (an existing
	// file keeps the one it was made with); 0 means DefaultPageSize.
	PageSize int
}

// DefaultPageSize is the page size of new data files: 16 KiB rather than
// bbolt's 4 KiB. A slot's import writes whole leaves in key order, and
// with values of a KiB a 4 KiB page holds three of them, so a 1 MiB batch
// dirtied some 350 pages, each written with its own pwrite and each
// splitting its parent. 16 KiB pages took a durable move of 20,000 keys of
// 1 KiB from 79-88 to 99-115 MB/s and of 100,000 keys of 100 B from 33-35
// to 35-40 MB/s, while fsynced single puts stayed at 2.5k ops/s
// (SLOTD_BENCH_SYNC=1 go test -bench MoveThroughput ./mover; go test
// -bench Put ./slotkv). 32 KiB gained nothing more and made unsynced puts
// a third slower.
const DefaultPageSize = 16 << 10

// Engine is slotkv's storage: one bbolt file. It implements node.Store and
// is safe for concurrent use.
type Engine struct {
	db *bolt.DB
	// update is db.Batch when commits are fsynced: concurrent writes to
	// different slots then share one fsync (group commit). Without fsync a
	// commit is cheap and db.Update avoids Batch's collection delay.
	update func(func(*bolt.Tx) error) error
}

var _ node.Store = (*Engine)(nil)

// OpenEngine opens or creates the data file at path.
func OpenEngine(path string, opts EngineOptions) (*Engine, error) {
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: opts.NoSync, PageSize: opts.PageSize})
	if err != nil {
		return nil, fmt.Errorf("slotkv: open %s: %w (is another slotkv using this data dir?)", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(dataBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("slotkv: init %s: %w", path, err)
	}
	e := &Engine{db: db, update: db.Update}
	if !opts.NoSync {
		// A lone writer waits at most this long for company.
		db.MaxBatchDelay = time.Millisecond
		e.update = db.Batch
	}
	return e, nil
}

// Close closes the data file.
func (e *Engine) Close() error { return e.db.Close() }

func slotPrefix(s slots.Slot) []byte {
	return binary.BigEndian.AppendUint16(nil, s.Uint16())
}

func dbKey(s slots.Slot, key []byte) []byte {
	return append(slotPrefix(s), key...)
}

// EncodeValue returns the stored form of a user value at a version.
func EncodeValue(version uint64, value []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), version), value...)
}

// DecodeValue splits a stored value into version and user value.
func DecodeValue(raw []byte) (version uint64, value []byte, err error) {
	if len(raw) < 8 {
		return 0, nil, ErrCorrupt
	}
	return binary.BigEndian.Uint64(raw), raw[8:], nil
}

// Get returns the stored value of key (version || user value), nil if absent.
func (e *Engine) Get(key []byte) (raw []byte, err error) {
	if len(key) == 0 {
		return nil, ErrEmptyKey
	}
	err = e.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(dataBucket).Get(dbKey(slots.ForKey(key), key)); v != nil {
			raw = bytes.Clone(v)
		}
		return nil
	})
	return raw, err
}

// Scan implements node.Store.
func (e *Engine) Scan(ctx context.Context, s slots.Slot, cursor []byte, maxBytes int) ([]node.Entry, []byte, error) {
	var out []node.Entry
	var next []byte
	err := e.db.View(func(tx *bolt.Tx) error {
		prefix := slotPrefix(s)
		c := tx.Bucket(dataBucket).Cursor()
		var k, v []byte
		if cursor == nil {
			k, v = c.Seek(prefix)
		} else {
			k, v = c.Seek(dbKey(s, cursor))
			if k != nil && bytes.Equal(k[2:], cursor) && bytes.HasPrefix(k, prefix) {
				k, v = c.Next() // the cursor is the last key already returned
			}
		}
		// Keys and values are copied out of the transaction into a few
		// buffers per batch instead of two allocations per entry (20,000
		// entries of a 1 MiB batch of 1 KiB values were 40,000 of them).
		// The buffers start small and double, so a slot of a few keys
		// does not pay for a batch-sized one; entries already taken keep
		// pointing into the buffer they were copied to.
		var arena []byte
		size := 0
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if size >= maxBytes && len(out) > 0 {
				next = bytes.Clone(out[len(out)-1].Key)
				return nil
			}
			key := k[2:]
			if n := len(key) + len(v); cap(arena)-len(arena) < n {
				arena = make([]byte, 0, max(n, min(2*cap(arena), scanArenaMax), scanArenaMin))
			}
			at := len(arena)
			arena = append(append(arena, key...), v...)
			e := node.Entry{Key: arena[at : at+len(key) : at+len(key)], Value: arena[at+len(key) : len(arena) : len(arena)]}
			size += len(e.Key) + len(e.Value)
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("slotkv: scan slot %d: %w", s.Int(), err)
	}
	return out, next, ctx.Err()
}

// A scan's copy buffers grow from scanArenaMin to scanArenaMax bytes.
const (
	scanArenaMin = 4 << 10
	scanArenaMax = 1 << 20
)

// Apply implements node.Store: one bbolt transaction per batch, possibly
// shared with concurrent batches (which is safe: a batch is idempotent, so
// bbolt may run it twice).
func (e *Engine) Apply(ctx context.Context, s slots.Slot, batch []node.Mutation) error {
	// An import batch arrives in key order (a slot's scan). bbolt splits
	// full pages in half by default, which for keys written in order leaves
	// every page half empty: twice the pages to write and keep. Packing
	// them to 90% is what bbolt documents for append-mostly writes.
	packed := len(batch) >= 64 && slices.IsSortedFunc(batch, func(a, b node.Mutation) int { return bytes.Compare(a.Key, b.Key) })
	// A batch of import size is its own group: waiting MaxBatchDelay for
	// company (db.Batch) only delays its commit, once per batch of a copy.
	update := e.update
	if len(batch) >= soloBatch {
		update = e.db.Update
	}
	err := update(func(tx *bolt.Tx) error {
		b := tx.Bucket(dataBucket)
		if packed {
			b.FillPercent = 0.9
		}
		// bbolt copies the key it is given, so one buffer serves every key
		// of the batch (it was two allocations a key).
		k := slotPrefix(s)
		for _, m := range batch {
			if len(m.Key) == 0 {
				return ErrEmptyKey
			}
			k = append(k[:2], m.Key...)
			if m.Delete {
				if err := b.Delete(k); err != nil {
					return err
				}
				continue
			}
			if len(m.Value) < 8 {
				return fmt.Errorf("%w: value of %q has no version", ErrCorrupt, m.Key)
			}
			if err := b.Put(k, m.Value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("slotkv: apply to slot %d: %w", s.Int(), err)
	}
	return nil
}

// soloBatch is the number of mutations from which Apply commits a batch
// in a transaction of its own instead of through bbolt's group commit.
const soloBatch = 64

// DeleteSlot implements node.Store. A slot that holds nothing, the common
// case (the node clears the slot before every move's first import batch,
// and a drop asks once more after its last delete), is answered by a read
// transaction: a write transaction that deletes nothing still commits,
// which on a durable engine is a freelist page, a meta page and two
// fdatasyncs before the move's first batch could be applied.
func (e *Engine) DeleteSlot(ctx context.Context, s slots.Slot, maxKeys int) (done bool, err error) {
	prefix := slotPrefix(s)
	err = e.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(dataBucket).Cursor().Seek(prefix)
		done = k == nil || !bytes.HasPrefix(k, prefix)
		return nil
	})
	if err == nil && !done {
		err = e.db.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket(dataBucket).Cursor()
			n := 0
			for k, _ := c.Seek(prefix); ; k, _ = c.Seek(prefix) {
				if k == nil || !bytes.HasPrefix(k, prefix) {
					done = true
					return nil
				}
				if n == maxKeys {
					return nil
				}
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
		})
	}
	if err != nil {
		return false, fmt.Errorf("slotkv: delete slot %d: %w", s.Int(), err)
	}
	return done, nil
}

// SlotSize implements node.Store by walking the slot's range.
func (e *Engine) SlotSize(ctx context.Context, s slots.Slot) (keys, size int64, err error) {
	err = e.db.View(func(tx *bolt.Tx) error {
		prefix := slotPrefix(s)
		c := tx.Bucket(dataBucket).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			keys++
			size += int64(len(k) - 2 + len(v))
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("slotkv: size of slot %d: %w", s.Int(), err)
	}
	return keys, size, nil
}

var _ node.SlotLister = (*Engine)(nil)

// SlotsWithData implements node.SlotLister: one seek per slot that holds
// data (plus one), in a single read transaction.
func (e *Engine) SlotsWithData(ctx context.Context) (slots.Set, error) {
	var set slots.Set
	err := e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(dataBucket).Cursor()
		for k, _ := c.First(); k != nil; {
			if len(k) < 2 {
				k, _ = c.Next()
				continue
			}
			n := int(binary.BigEndian.Uint16(k))
			if n >= slots.Count {
				return nil
			}
			set.Add(slots.MustNew(n))
			if n+1 >= slots.Count {
				return nil
			}
			k, _ = c.Seek(binary.BigEndian.AppendUint16(nil, uint16(n+1)))
		}
		return nil
	})
	if err != nil {
		return set, fmt.Errorf("slotkv: list slots: %w", err)
	}
	return set, nil
}

var _ node.SlotSizer = (*Engine)(nil)

// SlotSizes implements node.SlotSizer: one pass over the data file, in one
// read transaction, calling fn for each slot holding keys.
func (e *Engine) SlotSizes(ctx context.Context, fn func(s slots.Slot, keys, bytes int64)) error {
	err := e.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(dataBucket).Cursor()
		cur, keys, size := -1, int64(0), int64(0)
		flush := func() {
			if cur >= 0 && keys > 0 {
				fn(slots.MustNew(cur), keys, size)
			}
		}
		n := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) < 2 || binary.BigEndian.Uint16(k) >= slots.Count {
				continue // not a data key (none are written so)
			}
			if s := int(binary.BigEndian.Uint16(k)); s != cur {
				flush()
				cur, keys, size = s, 0, 0
			}
			keys++
			size += int64(len(k) - 2 + len(v))
			if n++; n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		flush()
		return nil
	})
	if err != nil {
		return fmt.Errorf("slotkv: slot sizes: %w", err)
	}
	return nil
}
