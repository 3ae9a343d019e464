package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// TestSlotStatsCarriesRates: a store's answer to SlotStats carries each
// slot's rates as a load report sent now would (the writes of the last
// seconds folded in), so a plan made right after a bulk load sees it.
func TestSlotStatsCarriesRates(t *testing.T) {
	clock := &simClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n, err := New(Config{ID: "a", Store: newMemStore(), Map: m, StateDir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	n.foldLoad(clock.now)
	k := []byte("loaded")
	for range 40 {
		if err := n.Write(ctx, k, put(string(k), "v")); err != nil {
			t.Fatal(err)
		}
	}
	clock.now = clock.now.Add(4 * time.Second) // no fold since the writes
	resp, err := (&storeServer{n: n}).SlotStats(ctx, &slotdv1.SlotStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s := uint32(slots.ForKey(k).Int())
	for _, st := range resp.GetSlots() {
		if st.GetSlot() != s {
			continue
		}
		r := st.GetRates()
		if r.GetWrites_10M() != 10 || r.GetWrites_1M() != 10 || r.GetMeasuredSeconds() != 4 || st.GetKeys() != 1 {
			t.Fatalf("slot %d in the answer: keys %d rates %v, want 1 key at 40 writes over 4 s", s, st.GetKeys(), r)
		}
		return
	}
	t.Fatalf("slot %d holding a key is not in the answer: %v", s, resp.GetSlots())
}
