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
	return st, nil
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
