package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// mover makes directory-level moves of empty slots back and forth: the
// etcd transactions the mover's leader writes for a move, without the
// copy, which at a few moves per second could not reach 100,000 moves in
// minutes. At rf 1 a move is BeginMove and CommitFencedMove (two
// transactions, the mover's fast path); at rf > 1 it is a replica's move
// to another node of its zone: remove-replica, add-learner, join-isr
// (three). workers goroutines move at once, each its own slots, so their
// writes are group-committed as the mover's parallel moves are.
type mover struct {
	dir     *directory.Directory
	workers int
	rf      int
	next    map[string]string // nodeInZone's
	claimed atomic.Int64      // moves begun or about to be
	done    atomic.Int64
	// Each worker's own, so that a run goes on where the last one ended:
	// what it knows of its slots (their owner at rf 1, the replica that
	// moves and the slot's epoch at rf > 1; element s is written only by
	// the worker of slot s), and its next slot.
	cur   [slots.Count]string
	epoch [slots.Count]uint64
	pos   []int
}

// newMover starts from snap.
func newMover(dir *directory.Directory, snap *directory.Snapshot, workers, rf int) *mover {
	m := &mover{dir: dir, workers: workers, rf: rf, next: nextInZone(snap.Nodes), pos: make([]int, workers)}
	for i := range slots.Count {
		s := slots.MustNew(i)
		if rf > 1 {
			set := snap.Replicas(s)
			m.cur[i], m.epoch[i] = set.ISR[len(set.ISR)-1], set.Epoch
		} else {
			m.cur[i] = snap.Owner(s)
		}
	}
	return m
}

// steps is how many directory transactions one move takes.
func (m *mover) steps() int {
	if m.rf > 1 {
		return 3
	}
	return 2
}

// run makes total moves and returns how many it made.
func (m *mover) run(ctx context.Context, total int, progress func(done int)) (int, error) {
	m.claimed.Store(m.done.Load())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for w := range m.workers {
		wg.Go(func() {
			if err := m.work(ctx, w, total, progress); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return int(m.done.Load()), first
}

// work moves the slots s with s mod workers == w, each in turn, until
// total moves are claimed.
func (m *mover) work(ctx context.Context, w, total int, progress func(int)) error {
	mine := (slots.Count - w + m.workers - 1) / m.workers
	for ; ; m.pos[w]++ {
		if ctx.Err() != nil || m.claimed.Add(1) > int64(total) {
			return nil
		}
		i := w + (m.pos[w]%mine)*m.workers
		s := slots.MustNew(i)
		from, to := m.cur[i], m.next[m.cur[i]]
		var err error
		if m.rf > 1 {
			m.epoch[i], err = m.moveReplica(ctx, s, from, to, m.epoch[i])
		} else {
			err = m.moveOwner(ctx, s, from, to)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		m.cur[i] = to
		if n := int(m.done.Add(1)); progress != nil {
			progress(n)
		}
	}
}

// nextInZone maps each node to the next one of its zone, in id order: at
// rf 1 any other node would do, at rf > 1 the zone rule asks for one of
// the same zone.
func nextInZone(nodes []directory.Node) map[string]string {
	byZone := map[string][]string{}
	for _, n := range nodes {
		byZone[n.Zone] = append(byZone[n.Zone], n.ID)
	}
	next := make(map[string]string, len(nodes))
	for _, ids := range byZone {
		for i, id := range ids {
			next[id] = ids[(i+1)%len(ids)]
		}
	}
	return next
}

const moveBy = "fleet"

func (m *mover) moveOwner(ctx context.Context, s slots.Slot, from, to string) error {
	mv, err := m.dir.BeginMove(ctx, directory.MoveSpec{Slot: s, From: from, To: to, Reason: "fleet simulation", By: moveBy})
	if err != nil {
		return fmt.Errorf("move slot %d: %w", s.Int(), err)
	}
	if _, err := m.dir.CommitFencedMove(ctx, s, mv.MoveID, moveBy, directory.Copied{}); err != nil {
		return fmt.Errorf("move slot %d: %w", s.Int(), err)
	}
	return nil
}

// moveReplica moves slot s's replica on from to to (same zone) and returns
// the slot's epoch after it. from leaves first: two replicas of one zone
// never coexist, and the ISR keeps rf-1 >= min_isr members meanwhile.
func (m *mover) moveReplica(ctx context.Context, s slots.Slot, from, to string, epoch uint64) (uint64, error) {
	for _, st := range []struct {
		step directory.ReplicaStep
		node string
	}{{directory.StepRemoveReplica, from}, {directory.StepAddLearner, to}, {directory.StepJoinISR, to}} {
		set, _, err := m.dir.ChangeReplicas(ctx, directory.ReplicaChange{
			Slot: s, Step: st.step, Node: st.node, ExpectEpoch: epoch, Reason: "fleet simulation", By: moveBy,
		})
		if err != nil {
			return 0, fmt.Errorf("move a replica of slot %d from %s to %s: %w", s.Int(), from, to, err)
		}
		epoch = set.Epoch
	}
	return epoch, nil
}
