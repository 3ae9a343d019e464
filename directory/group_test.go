package directory

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestGroupCommit queues updates behind a busy writer, so that they are
// written as one group whatever the timing, and checks that each one
// behaves as if written alone: its own version and history entry, a failing
// one fails alone and changes nothing, and the group costs one etcd
// revision per maxGroup changes.
func TestGroupCommit(t *testing.T) {
	tests := []struct {
		name  string
		moves int  // BeginMoves of distinct slots, all valid
		bad   bool // plus one BeginMove of a slot n0 does not own
	}{
		{"one", 1, false},
		{"several", 7, false},
		{"several with a failure", 7, true},
		{"more than one txn holds", maxGroup + 5, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, d, snap := setup(t, 3, nil)
			ctx := testCtx(t)
			var ss []slots.Slot
			owned := snap.SlotsOf("n0")
			for s := range owned.All() {
				if len(ss) == tc.moves {
					break
				}
				ss = append(ss, s)
			}
			foreign := slots.MustNew(ownerSlot(t, snap, "n1"))
			rev0 := revision(t, c)

			// Hold the queue: every update waits for a writer.
			d.group.mu.Lock()
			d.group.busy = true
			d.group.mu.Unlock()

			n := len(ss)
			if tc.bad {
				n++
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					spec := MoveSpec{From: "n0", To: "n2", MoveID: fmt.Sprintf("g-%d", i)}
					if i < len(ss) {
						spec.Slot = ss[i]
					} else {
						spec.Slot = foreign
					}
					_, errs[i] = d.BeginMove(ctx, spec)
				}()
			}
			eventually(t, time.Minute, func() error {
				d.group.mu.Lock()
				defer d.group.mu.Unlock()
				if len(d.group.queue) != n {
					return fmt.Errorf("%d updates queued, want %d", len(d.group.queue), n)
				}
				return nil
			})
			// Release: the next update finds the queue idle and writes it all.
			d.group.mu.Lock()
			d.group.busy = false
			d.group.mu.Unlock()
			if _, err := d.SetWeight(ctx, "n1", 2, "test"); err != nil {
				t.Fatalf("set weight: %v", err)
			}
			wg.Wait()

			for i, err := range errs {
				if i >= len(ss) {
					if !errors.Is(err, ErrPrecondition) {
						t.Errorf("move of a foreign slot: err %v, want ErrPrecondition", err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("move %d of slot %d: %v", i, ss[i].Int(), err)
				}
			}
			want := snap.Version + uint64(len(ss)) + 1 // the moves and the weight
			if v := mustVersion(t, d); v != want {
				t.Fatalf("version %d, want %d", v, want)
			}
			fresh, err := d.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ss {
				if mv, ok := fresh.Move(s); !ok || mv.To != "n2" {
					t.Errorf("slot %d: move %+v, %v; want a move to n2", s.Int(), mv, ok)
				}
			}
			if _, ok := fresh.Move(foreign); ok {
				t.Errorf("the failed move of slot %d left a move in flight", foreign.Int())
			}
			hist, err := d.HistorySince(ctx, snap.Version, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) != len(ss)+1 {
				t.Fatalf("%d history entries since %d, want %d", len(hist), snap.Version, len(ss)+1)
			}
			begun := map[string]int{}
			for i, h := range hist {
				if h.Version != snap.Version+uint64(i)+1 {
					t.Errorf("history entry %d has version %d, want %d", i, h.Version, snap.Version+uint64(i)+1)
				}
				if h.Kind == ChangeMoveBegin {
					begun[h.MoveID]++
				}
			}
			for i := range ss {
				if id := fmt.Sprintf("g-%d", i); begun[id] != 1 {
					t.Errorf("move %s begun %d times in history, want 1", id, begun[id])
				}
			}
			// Queued: every update but the releasing one, in groups of
			// maxGroup; then the releasing one (SetThrottle) with the rest.
			txns := int64((n + 1 + maxGroup - 1) / maxGroup)
			if got := revision(t, c) - rev0; got != txns {
				t.Errorf("%d etcd revisions for %d updates, want %d (group commit)", got, n+1, txns)
			}
		})
	}
}

func revision(t *testing.T, c *etcdtest.Cluster) int64 {
	t.Helper()
	resp, err := c.Client().Get(testCtx(t), "slotd-test-revision-probe", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
