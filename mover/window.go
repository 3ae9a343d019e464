package mover

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/slotd/slotd/directory"
)

// windowBatch is how many moves, in units of Parallelism, runWindow starts
// before it returns to the plan loop (which then refreshes the plans).
// Each return drains the window (its last moves run with the window
// emptying), so it is a cost per batch: 64 makes six of them in a
// 3 -> 4 rebalance of 4,096 slots at the default window (12), not twenty-two.
const windowBatch = 64

// What "one slot at a time" means here: each donor streams at most one
// snapshot of a slot holding data at a time. A move's copy is what loads
// its donor (a scan of the whole slot, its bytes through the donor's
// throttle); its catch-up, fence, drain and commit are small reads and
// directory round trips. So a donor's data moves wait at the donor's gate
// before their copy (donorGates.acquire, from the move's transfer) and
// pass it on when their copy is over (slotTransfer.Copied), and the window
// keeps the donor's next data move begun and waiting at the gate
// (readyPerDonor): its directory round trips are then no gap in the
// donor's copy, which stays continuous under the throttle. Near-empty
// slots (SmallSlotBytes) copy in one small batch and share the window,
// several at once; moves from other donors run alongside; at most
// Parallelism are in flight. The other rule of a careful rebalance, one
// membership change at a time, is the plan's: one plan applies at a time,
// and its node edits are made before its first move.

// readyPerDonor bounds a donor's data moves in flight: one copying, and
// the next begun and waiting at the donor's gate.
const readyPerDonor = 2

// window is runWindow's state: the plan whose moves it runs, the moves it
// started that have not ended, and the data moves among them per donor.
type window struct {
	p     *Plan
	g     *planGuard
	book  *planBook
	limit int            // moves in flight at most (Parallelism)
	small func(int) bool // whether move i moves a near-empty slot; nil: none does
	mu    sync.Mutex     // guards running, data, inFlight, errs, from and remaining
	// running are the moves started that have not ended, by index.
	running  map[int]bool
	data     map[string]int // data moves in flight, by donor id
	inFlight int
	errs     []error
	// from is the first move pick looks at: the ones before it ended for
	// good (a window of a 4,096-move plan picks 768 times; each scan from
	// the start held recMu over the ended prefix).
	from int
	// remaining is the plan's estimated bytes not moved yet (the
	// slotd_mover_bytes_remaining gauge).
	remaining int64
	// changed wakes the loop when a move ends.
	changed chan struct{}
}

func (w *window) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// runWindow runs the pending moves of plan p with up to Parallelism in
// flight, of which at most readyPerDonor move slots holding data from one
// donor (their copies take turns at the donor's gate): a move that ends
// makes room for the next pending one that may run (plan order, skipping
// data moves of a donor that has its share). It stops starting moves
// after windowBatch*Parallelism of them, when p stops applying (a move
// paused it, or the operator did: g halts), or when a move returns an
// error, and returns once the moves in flight have ended.
func (e *Executor) runWindow(ctx context.Context, snap *directory.Snapshot, p *Plan, g *planGuard) error {
	w := &window{p: p, g: g, book: e.plans, limit: e.cfg.Parallelism,
		running: map[int]bool{}, data: map[string]int{}, changed: make(chan struct{}, 1)}
	pr := e.plans.progress(p)
	w.remaining = pr.Bytes - pr.BytesDone
	if w.limit > 1 && len(p.Moves) > 1 {
		// (A plan of one move, `slotctl move`, has nothing to share its
		// donor with: no sizes to ask for before it starts.)
		w.small = e.nearEmpty(ctx, snap, p, windowBatch*w.limit)
	}
	var wg sync.WaitGroup
	for started := 0; started < windowBatch*w.limit; {
		i, data, wait := w.pick(ctx)
		if wait {
			select {
			case <-w.changed:
			case <-ctx.Done():
			}
			continue
		}
		if i < 0 {
			break
		}
		started++
		// A later move checks the table on the newest one watched.
		at := snap
		if l := e.latest.Load(); l != nil && l.Version > at.Version {
			at = l
		}
		donor := p.Moves[i].From
		k := copyKey{p.ID, i}
		e.gates.markData(k, data)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.runMove(ctx, at, p, i, g)
			e.gates.markData(k, false)
			e.plans.recMu.Lock()
			done, bytes := p.Moves[i].Status == MoveDone, p.Moves[i].Bytes
			e.plans.recMu.Unlock()
			w.mu.Lock()
			if done {
				// The gauge follows the window, not only its batches.
				w.remaining -= bytes
				e.m.bytesRemaining.Set(float64(max(w.remaining, 0)))
			}
			delete(w.running, i)
			if data {
				w.data[donor]--
			}
			w.inFlight--
			if err != nil {
				w.errs = append(w.errs, err)
			}
			w.mu.Unlock()
			w.signal()
		}()
	}
	wg.Wait()
	return errors.Join(w.errs...)
}

// pick chooses the next move of w's plan to start and marks it running:
// the first runnable one not running that the window has room for, and,
// if its slot holds data (data), its donor too. It returns i < 0 when no
// move should start any more, and wait when one may start after a move in
// flight ends or is fenced.
func (w *window) pick(ctx context.Context) (i int, data, wait bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.book.recMu.Lock() // moves write p's statuses and state under it
	defer w.book.recMu.Unlock()
	p := w.p
	if len(w.errs) > 0 || !applying(p.State) || w.g.halted.Load() || ctx.Err() != nil {
		return -1, false, false
	}
	blocked := false
	for k := w.from; k < len(p.Moves); k++ {
		m := p.Moves[k]
		// A failed move is runnable again once its plan is resumed; the
		// one failing now stays running until it paused the plan.
		if !m.Status.runnable() || w.running[k] {
			if k == w.from && !m.Status.runnable() && !w.running[k] {
				w.from++ // done, skipped or aborted: never runnable again
			}
			continue
		}
		if w.inFlight >= w.limit {
			return -1, false, true
		}
		isData := w.small == nil || !w.small(k)
		if isData && w.data[m.From] >= readyPerDonor {
			blocked = true
			continue
		}
		w.running[k] = true
		w.inFlight++
		if isData {
			w.data[m.From]++
		}
		return k, isData, false
	}
	return -1, false, blocked
}

// nearEmpty returns whether move i of p moves a near-empty slot, for the
// first n runnable moves: the larger of the plan's estimate and what the
// donor reports now is at most SmallSlotBytes. A donor that does not
// answer makes its slots count as holding data, as do moves beyond the
// first n (a later window asks again).
func (e *Executor) nearEmpty(ctx context.Context, snap *directory.Snapshot, p *Plan, n int) func(int) bool {
	limit := e.cfg.SmallSlotBytes
	if limit < 0 {
		limit = 0
	}
	e.plans.recMu.Lock()
	byDonor := map[string][]uint32{}
	asked := map[int]int64{} // move index -> the plan's estimate
	for k, m := range p.Moves {
		if len(asked) == n {
			break
		}
		if m.Status.runnable() {
			asked[k] = m.Bytes
			byDonor[m.From] = append(byDonor[m.From], uint32(m.Slot))
		}
	}
	e.plans.recMu.Unlock()
	reported := map[string]map[uint32]int64{}
	var mu sync.Mutex // guards reported
	var wg sync.WaitGroup
	for donor, ss := range byDonor {
		nd, ok := snap.Node(donor)
		if !ok || nd.Addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sizes, err := e.cfg.Stores.sizesOn(ctx, nd.Addr, ss)
			if err != nil {
				e.lg.Warn("donor's slot sizes unknown; its slots count as holding data", "node", donor, "err", err)
				return
			}
			mu.Lock()
			reported[donor] = sizes
			mu.Unlock()
		}()
	}
	wg.Wait()
	small := make(map[int]bool, len(asked))
	for k, est := range asked {
		m := p.Moves[k]
		sizes, ok := reported[m.From]
		if !ok {
			continue
		}
		small[k] = max(est, sizes[uint32(m.Slot)]) <= limit
	}
	return func(i int) bool { return small[i] }
}

// copyKey names a move of a plan.
type copyKey struct {
	plan  string
	index int
}

// donorGates lets each donor copy one slot holding data at a time: the
// window registers its data moves, and their copies wait for the donor's
// gate. Safe for concurrent use.
type donorGates struct {
	mu    sync.Mutex // guards data and gates
	data  map[copyKey]bool
	gates map[string]chan struct{} // per donor: full while one of its data moves copies
}

func newDonorGates() *donorGates {
	return &donorGates{data: map[copyKey]bool{}, gates: map[string]chan struct{}{}}
}

// markData registers move k as moving a slot holding data: its copies
// wait for their donor's gate.
func (d *donorGates) markData(k copyKey, data bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if data {
		d.data[k] = true
	} else {
		delete(d.data, k)
	}
}

// isData reports whether move k was registered as moving a slot holding
// data.
func (d *donorGates) isData(k copyKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.data[k]
}

// acquire waits until move mv may copy: at once for a near-empty slot or
// a move outside the window (one settled), else when no other copy of a
// slot holding data runs on its donor. release (idempotent) passes the
// donor on; an error is ctx's.
func (d *donorGates) acquire(ctx context.Context, mv directory.Move) (release func(), err error) {
	d.mu.Lock()
	if !d.data[copyKey{mv.PlanID, mv.Index}] {
		d.mu.Unlock()
		return func() {}, nil
	}
	gate := d.gates[mv.From]
	if gate == nil {
		gate = make(chan struct{}, 1)
		d.gates[mv.From] = gate
	}
	d.mu.Unlock()
	select {
	case gate <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for donor %s to copy slot %d: %w", mv.From, mv.Slot.Int(), ctx.Err())
	}
	var once sync.Once
	return func() { once.Do(func() { <-gate }) }, nil
}
