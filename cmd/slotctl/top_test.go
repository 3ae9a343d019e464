package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// TestLoadViews: status and top keys|slots, table and JSON, against a
// real slotd to which n1 and n2 report their load over gRPC (n3 does not:
// unknown). n2 carries a hot tag: its slot is a hot spot and its key is
// flagged above 20% of n2's capacity.
func TestLoadViews(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	s.settle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := slotdv1.NewDirectoryClient(cc).GetMap(ctx, &slotdv1.GetMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := slotmap.FromProto(resp.GetMap())
	if err != nil {
		t.Fatal(err)
	}
	// The first three slots of each node, and a tagged key of n2's.
	first := func(id string, n int) []uint32 {
		var out []uint32
		set := m.SlotsOf(id)
		for s := range set.All() {
			if len(out) < n {
				out = append(out, uint32(s.Uint16()))
			}
		}
		return out
	}
	var hot []byte
	for i := 0; hot == nil; i++ {
		if k := fmt.Appendf(nil, "{cart%d}:items", i); m.OwnerID(slots.ForKey(k)) == "n2" {
			hot = k
		}
	}
	hotSlot := uint32(slots.ForKey(hot).Uint16())
	lc := slotdv1.NewLoadClient(cc)
	report := func(r *slotdv1.LoadReport) {
		t.Helper()
		r.Version, r.Interval = m.Version(), durationpb.New(10*time.Minute)
		if _, err := lc.Report(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var n1 []*slotdv1.SlotLoad
	for i, sl := range first("n1", 3) {
		n1 = append(n1, &slotdv1.SlotLoad{Slot: sl, Keys: uint64(100 + i), Bytes: uint64(10000 * (i + 1)), Reads_10M: 10, Writes_10M: 5, Reads_1M: 11, Writes_1M: 4})
	}
	report(&slotdv1.LoadReport{NodeId: "n1", Slots: n1,
		HotKeys: []*slotdv1.HotKey{{Key: []byte("user 1\x00"), Slot: n1[0].Slot, Rate: 2, Error: 0.5, Truncated: true}}})
	var n2 []*slotdv1.SlotLoad
	for _, sl := range first("n2", 2) {
		if sl != hotSlot {
			n2 = append(n2, &slotdv1.SlotLoad{Slot: sl, Keys: 50, Bytes: 5000, Reads_10M: 2, Writes_10M: 1})
		}
	}
	n2 = append(n2, &slotdv1.SlotLoad{Slot: hotSlot, Keys: 3, Bytes: 900, Reads_10M: 90, Writes_10M: 10, Tag: string(slots.TaggedBytes(hot))})
	report(&slotdv1.LoadReport{NodeId: "n2", Slots: n2,
		HotKeys: []*slotdv1.HotKey{{Key: hot, Slot: hotSlot, Rate: 80, Error: 4}}})

	for _, st := range []struct {
		name string
		args []string
	}{
		{"status_load", []string{"status"}},
		{"top_keys", []string{"top", "keys"}},
		{"top_slots", []string{"top", "slots", "--limit", "4"}},
		{"top_slots_bytes", []string{"top", "slots", "--by", "bytes", "--limit", "3"}},
	} {
		for _, form := range []string{"table", "json"} {
			t.Run(st.name+"_"+form, func(t *testing.T) {
				golden(t, st.name+"_"+form+".golden", elideTimes(s.ok(t, append([]string{"-o", form}, st.args...)...)))
			})
		}
	}
	if r := s.run(t, "", "top", "slots", "--by", "keys"); r.code != exitUsage {
		t.Fatalf("top slots --by keys: exit %d, want %d", r.code, exitUsage)
	}
}
