// Package mover changes slot owners: it plans moves, stores plans, and
// runs them, each donor copying one slot holding data at a time while
// near-empty slots share a window, through the single-slot move protocol
// (copy, catch-up, fence, drain, verify, commit), while this slotd holds
// the cluster's mover leadership.
//
// The operator's side, which every slotd replica serves (Control):
//
//	control.go     Control and its config; propose, apply, pause, resume,
//	               cancel, throttle.
//	submit.go      an operator's plan file: its checks (well formed, and
//	               a plan of this cluster), then stored as proposed.
//	moveslot.go    one-slot moves (slotctl move), begun at once by the
//	               leader when this process leads.
//	rollback.go    the reverse of a stopped plan: it waits for the plan's
//	               moves in flight, then reverses exactly its committed ones.
//	plan.go        the Plan as stored and shown, its states and encoding.
//	planstore.go   plan records through the directory's plan API: their
//	               decoded cache, retention, and the move results the
//	               directory writes in the transaction that ends each move.
//	planinput.go   the planner adapter: the table and a plan's node edits
//	               as the planner's input (mover/planner is pure).
//	measure.go     what a plan is measured on: the load reports with the
//	               stores' answers of now (sizes and the rates of the last
//	               seconds).
//	loadsource.go  LoadSource, the nodes' measured load as the mover uses it.
//	pool.go        StorePool: one connection per store, and the stores'
//	               slot sizes (SlotStats).
//	statusmetrics.go  node and plan state as metrics, read at each scrape.
//
// The leader's side (Executor), in the order a move passes through it:
//
//	leader.go      the Executor: etcd's concurrency.Election, and what runs
//	               only while leading (the watches, the throttle, liveness,
//	               ExecutorConfig.LeaderParts such as the balancer).
//	planloop.go    plan discovery: settle moves left in flight, else run
//	               the applying plan's window, else wait for work.
//	planbook.go    planBook: the plan records as last read, the executor's
//	               own writes, results and state changes, and the one-move
//	               plans handed over.
//	window.go      the window: up to Parallelism moves of the plan in
//	               flight, and the donor gates (one data copy per donor).
//	move.go        runningMove, one move from its turn to its commit:
//	               begin, drive (retries from the recorded phase, a copy
//	               restarted when the capture was lost), the transfer and
//	               its journal in the directory.
//	abort.go       the undo of a move: the stores' and the directory's
//	               abort, and the settling of moves left in flight.
//	transfer.go    the protocol itself, between two stores; relay.go and
//	               relaywire.go pass snapshot batches through as the bytes
//	               the source encoded; transfererr.go tells its errors apart.
//	earlyexport.go a fresh move's export opened beside its begin.
//	onemove.go     a one-move plan stored and begun in one transaction by
//	               the leader, then handed to the plan loop.
//	guard.go       an operator's pause or cancel applied to moves in flight.
//	cleanup.go     asking stores to drop handed-off copies, for a while;
//	               the stores' reconciliation is the guarantee.
//	metrics.go     the executor's metrics.
//	balancer.go    the automatic balancer (a LeaderPart); autodecide.go is
//	               its pure decision.
//	mutant.go, notmutant.go  the switch of the mutant build that proves the
//	               scripted tests (testdata/script) can fail.
//
// A move's path, to read it: window.go (runWindow starts runMove for each
// move it picks), move.go (runningMove.run, begin, drive, attempt,
// transfer), transfer.go (slotTransfer.Run: copy, catch-up, fence, drain,
// verify, and the journal's Commit, in move.go, that names the new owner).
//
// Usage, as server/ wires it:
//
//	ctl, _ := mover.NewControl(mover.ControlConfig{Directory: dir, Sizes: pool})
//	exe, _ := mover.NewExecutor(mover.ExecutorConfig{
//		Directory: dir, Control: ctl, Etcd: cli, Stores: pool, Name: "slotd-1",
//	})
//	go exe.Run(ctx) // campaigns; runs plans while it leads
//	p, _ := ctl.Propose(ctx, mover.PlanRequest{Edits: mover.Edits{Add: []mover.NodeSpec{{ID: "n4"}}}})
//	_, _ = ctl.Apply(ctx, p.ID, "alice")
package mover
