package node

import (
	"context"

	"github.com/slotd/slotd/slots"
)

// Entry is one key and its stored value, as a store holds it. The value is
// opaque to the library: a store that keeps a version or a timestamp with the
// value keeps it inside Value, so that a copied slot is identical byte for byte.
type Entry struct {
	Key   []byte
	Value []byte
}

// Mutation is one write: a put of Value under Key, or a delete of Key when
// Delete is set. A mutation always carries the full new value, never a delta,
// so applying it twice leaves the same state as applying it once.
type Mutation struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Store is what a storage engine implements to take part in slot moves. It
// is deliberately small: the library does ownership checks, change capture,
// fencing, throttling and the gRPC protocol around it.
//
// Every method must be safe for concurrent use. Keys passed to and returned
// by a method all belong to the slot named in the call.
type Store interface {
	// Scan returns the slot's entries in ascending key order, starting after
	// cursor (from the beginning when cursor is nil), stopping once the
	// returned entries hold at least maxBytes of keys and values (always at
	// least one entry when any remains). next is the cursor to pass to the
	// following call, nil when the slot has no more entries. A cursor must
	// stay valid across a restart of the store: the key of the last returned
	// entry is the natural choice.
	Scan(ctx context.Context, slot slots.Slot, cursor []byte, maxBytes int) (entries []Entry, next []byte, err error)

	// Apply applies the mutations in order, atomically if the store can.
	// Applying the same batch twice must leave the same state as once.
	// The batch's keys and values are valid only until Apply returns (an
	// import's point into the buffer its request was received in): a
	// store that keeps one afterwards keeps a copy.
	Apply(ctx context.Context, slot slots.Slot, batch []Mutation) error

	// DeleteSlot deletes up to maxKeys of the slot's keys and reports whether
	// the slot is now empty. The library calls it repeatedly, throttled, so
	// that dropping a large slot does not starve live traffic.
	DeleteSlot(ctx context.Context, slot slots.Slot, maxKeys int) (done bool, err error)

	// SlotSize returns the number of keys in the slot and the bytes their
	// keys and values take. An estimate is fine for planning.
	SlotSize(ctx context.Context, slot slots.Slot) (keys, bytes int64, err error)
}
