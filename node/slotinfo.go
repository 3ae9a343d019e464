package node

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/slotd/slotd/slots"
)

// SlotStats describes one slot on this node.
type SlotStats struct {
	Slot            slots.Slot
	Keys, Bytes     int64
	WritesPerSecond float64 // over the last stats window
	Owned           bool
	Fenced          bool
	Capturing       bool
	Dropping        bool
}

// MapVersion returns the version of the node's slot map, 0 before one.
func (n *Node) MapVersion() uint64 {
	o, _ := n.cfg.Map.Owner(slots.Slot{})
	return o.Version
}

// Stats reports on slot s.
func (n *Node) Stats(ctx context.Context, s slots.Slot) (SlotStats, error) {
	keys, size, err := n.store.SlotSize(ctx, s)
	if err != nil {
		return SlotStats{}, fmt.Errorf("node: size of slot %d: %w", s.Int(), err)
	}
	return n.statsOf(s, keys, size), nil
}

// StatsAll reports on every slot that holds data on this node or is
// fenced, being captured or being dropped here, in slot order: what a
// SlotStats call with no slots lists. A store that is a SlotSizer is sized
// in one pass over its data; any other store through SlotSize per slot.
func (n *Node) StatsAll(ctx context.Context) ([]SlotStats, error) {
	var every slots.Set
	every.AddRange(slots.MustNew(0), slots.MustNew(slots.Count-1))
	var keys, bytes [slots.Count]int64
	if err := n.slotSizes(ctx, &every, &keys, &bytes); err != nil {
		return nil, err
	}
	var out []SlotStats
	for i := range slots.Count {
		st := n.statsOf(slots.MustNew(i), keys[i], bytes[i])
		if st.Keys != 0 || st.Fenced || st.Capturing || st.Dropping {
			out = append(out, st)
		}
	}
	return out, nil
}

// slotSizes sets keys and bytes to the size of every slot holding data:
// in one pass when the store is a SlotSizer, else through SlotSize for
// each slot of fallback (the others are left as they are).
func (n *Node) slotSizes(ctx context.Context, fallback *slots.Set, keys, bytes *[slots.Count]int64) error {
	if sz, ok := n.store.(SlotSizer); ok {
		err := sz.SlotSizes(ctx, func(s slots.Slot, k, b int64) {
			keys[s.Int()], bytes[s.Int()] = k, b
		})
		if err != nil {
			return fmt.Errorf("node: slot sizes: %w", err)
		}
		return nil
	}
	for s := range fallback.All() {
		k, b, err := n.store.SlotSize(ctx, s)
		if err != nil {
			return fmt.Errorf("node: size of slot %d: %w", s.Int(), err)
		}
		keys[s.Int()], bytes[s.Int()] = k, b
	}
	return nil
}

// statsOf completes the stats of slot s, whose size the store gave.
func (n *Node) statsOf(s slots.Slot, keys, size int64) SlotStats {
	st := SlotStats{Slot: s, Keys: keys, Bytes: size, Fenced: n.Fenced(s), Capturing: n.captureOf(s) != nil}
	n.rateMu.Lock()
	st.WritesPerSecond = float64(n.lastRate[s.Int()])
	n.rateMu.Unlock()
	if o, ok := n.cfg.Map.Owner(s); ok {
		st.Owned = o.ID == n.cfg.ID
	}
	n.dropMu.Lock()
	_, st.Dropping = n.dropping[s]
	n.dropMu.Unlock()
	return st
}

// Checksum is a digest of a slot's contents: equal on two nodes exactly when
// they hold the same keys with the same values, byte for byte.
type Checksum struct {
	Keys, Bytes int64
	// SHA256 over the entries in key order, each framed as
	// uint32be(len(key)) || key || uint32be(len(value)) || value.
	SHA256  [32]byte
	HighSeq uint64 // newest captured change when the digest was taken
}

// Checksum scans slot s and digests it. It is not throttled: run it on a
// fenced or idle slot, or accept that it reads the whole slot.
func (n *Node) Checksum(ctx context.Context, s slots.Slot) (Checksum, error) {
	var sum Checksum
	if c := n.captureOf(s); c != nil {
		sum.HighSeq = c.last()
	}
	h := sha256.New()
	var cursor, buf []byte
	for {
		entries, next, err := n.store.Scan(ctx, s, cursor, 1<<20)
		if err != nil {
			return Checksum{}, fmt.Errorf("node: checksum slot %d: %w", s.Int(), err)
		}
		for _, e := range entries {
			buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(e.Key)))
			buf = append(buf, e.Key...)
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(e.Value)))
			buf = append(buf, e.Value...)
			h.Write(buf)
			sum.Keys++
			sum.Bytes += int64(len(e.Key) + len(e.Value))
		}
		if next == nil {
			break
		}
		cursor = next
	}
	h.Sum(sum.SHA256[:0])
	return sum, nil
}
