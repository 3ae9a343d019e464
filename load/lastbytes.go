package load

import "time"

// LastBytes returns the bytes node id held in its last report this
// replica accepted, live or expired, and when it came; ok is false without
// one. A node declared failed stopped reporting long ago: this is the best
// estimate of what its loss is (slotctl nodes fail shows it as such).
func (a *Aggregator) LastBytes(id string) (bytes uint64, at time.Time, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reports[id]
	if !ok {
		return 0, time.Time{}, false
	}
	for _, s := range r.slots {
		bytes += uint64(s.Bytes)
	}
	return bytes, r.received, true
}
