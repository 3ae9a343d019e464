package slotkv

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

// TestPageSize: a new data file gets DefaultPageSize; a file made with
// another page size (bbolt's 4 KiB, what earlier slotkv versions wrote)
// keeps it and its data when opened with the new default.
func TestPageSize(t *testing.T) {
	key := []byte("user:42")
	s := slots.ForKey(key)
	tests := []struct {
		name    string
		created int // page size the file is made with (0: the default)
		want    int
	}{
		{"new file", 0, DefaultPageSize},
		{"file of an earlier version", 4096, 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "slotkv.db")
			e, err := OpenEngine(path, EngineOptions{PageSize: tc.created})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Apply(context.Background(), s, []node.Mutation{{Key: key, Value: EncodeValue(1, []byte("v1"))}}); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e, err = OpenEngine(path, EngineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := e.db.Info().PageSize; got != tc.want {
				t.Errorf("page size = %d, want %d", got, tc.want)
			}
			if raw, err := e.Get(key); err != nil || raw == nil {
				t.Fatalf("Get after reopen: %q, %v", raw, err)
			}
		})
	}
}

// TestSlotSizesOnePass: SlotSizes reports every slot holding keys, with
// the counts SlotSize gives slot by slot, and nothing for empty slots.
func TestSlotSizesOnePass(t *testing.T) {
	ctx := context.Background()
	e, err := OpenEngine(filepath.Join(t.TempDir(), "slotkv.db"), EngineOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 500 {
		k := fmt.Appendf(nil, "k%d", i)
		if err := e.Apply(ctx, slots.ForKey(k), []node.Mutation{{Key: k, Value: EncodeValue(1, make([]byte, i%7))}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[slots.Slot][2]int64{}
	if err := e.SlotSizes(ctx, func(s slots.Slot, keys, bytes int64) {
		if _, dup := got[s]; dup {
			t.Errorf("slot %d reported twice", s.Int())
		}
		got[s] = [2]int64{keys, bytes}
	}); err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for i := range slots.Count {
		s := slots.MustNew(i)
		k, b, err := e.SlotSize(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := got[s]; (k > 0) != ok || g != [2]int64{k, b} {
			t.Fatalf("slot %d: SlotSizes %v (reported %v), SlotSize %d keys %d bytes", i, g, ok, k, b)
		}
		total += k
	}
	if total != 500 {
		t.Fatalf("%d keys in all, want 500", total)
	}
}

// TestDeleteSlot: DeleteSlot deletes up to maxKeys of the slot's keys,
// no other slot's, and says done once the slot is empty; asked about a
// slot that holds nothing (before every move's first import batch) it
// writes nothing, where a write transaction would still commit and, on a
// durable engine, sync.
func TestDeleteSlot(t *testing.T) {
	ctx := context.Background()
	e, err := OpenEngine(filepath.Join(t.TempDir(), "slotkv.db"), EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, other := slots.ForString("{del}"), slots.ForString("{keep}")
	for i := range 5 {
		for _, tag := range []string{"{del}", "{keep}"} {
			k := fmt.Appendf(nil, "%s:%d", tag, i)
			if err := e.Apply(ctx, slots.ForKey(k), []node.Mutation{{Key: k, Value: EncodeValue(1, []byte("v"))}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name     string
		maxKeys  int
		wantDone bool
		wantKeys int64 // left in s
		writes   bool  // the call commits a write transaction
	}{
		{"some of the keys", 3, false, 2, true},
		{"the rest", 3, true, 0, true},
		{"an empty slot", 3, true, 0, false},
	}
	for _, st := range steps {
		before := e.db.Stats()
		done, err := e.DeleteSlot(ctx, s, st.maxKeys)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		keys, _, err := e.SlotSize(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if done != st.wantDone || keys != st.wantKeys {
			t.Errorf("%s: done %v with %d keys left, want %v with %d", st.name, done, keys, st.wantDone, st.wantKeys)
		}
		after := e.db.Stats()
		if wrote := after.TxStats.GetWrite() > before.TxStats.GetWrite(); wrote != st.writes {
			t.Errorf("%s: wrote pages %v, want %v", st.name, wrote, st.writes)
		}
	}
	if keys, _, err := e.SlotSize(ctx, other); err != nil || keys != 5 {
		t.Fatalf("other slot holds %d keys (%v), want all 5", keys, err)
	}
}
