package ringcompat

import "sync/atomic"

// Holder holds the current ring of a router. Lookups Load it without
// locking; a membership change builds a new ring and swaps it in. The zero
// Holder holds nil. It is safe for concurrent use.
type Holder struct {
	p atomic.Pointer[Ring]
}

// NewHolder returns a Holder holding r.
func NewHolder(r *Ring) *Holder {
	h := &Holder{}
	h.p.Store(r)
	return h
}

// Load returns the current ring (nil before the first Store).
func (h *Holder) Load() *Ring { return h.p.Load() }

// Store makes r the current ring.
func (h *Holder) Store(r *Ring) { h.p.Store(r) }

// Update replaces the current ring with change(current), retrying when
// another Update or Store won the race, so concurrent changes are never lost.
// change must be a pure function of its argument: it may run more than once.
// When change fails, the current ring stays and its error is returned.
func (h *Holder) Update(change func(*Ring) (*Ring, error)) (*Ring, error) {
	for {
		cur := h.p.Load()
		next, err := change(cur)
		if err != nil {
			return nil, err
		}
		if h.p.CompareAndSwap(cur, next) {
			return next, nil
		}
	}
}
