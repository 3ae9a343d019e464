// Package mover changes slot owners: it plans moves, stores plans, and
// runs them, each donor copying one slot holding data at a time while
// near-empty slots share a window, through the single-slot protocol of DESIGN "Moving one slot", while this slotd holds
// the cluster's mover leadership.
//
// One room, one job:
//
//	control.go    the operator's workflow: propose, submit, apply, pause,
//	              resume, cancel, throttle.
//	moveslot.go   one-slot moves (slotctl move), begun at once by the leader.
//	measure.go    what a plan is measured on: reports with the stores'
//	              answers of now (StorePool.SlotStats, pool.go).
//	planstore.go  plan records through the directory's plan API: their
//	              decoded cache, retention, and the move results the
//	              directory writes in the transaction that ends each move
//	              (so status, cancel and rollback read exactly what
//	              happened, never a periodic snapshot).
//	planinput.go  the planner adapter: the table and a plan's node edits as
//	              the planner's input (mover/planner is pure).
//	rollback.go   the reverse of a stopped plan: it waits for the plan's
//	              moves in flight, then reverses exactly its committed ones.
//	leader.go     the Executor: etcd's concurrency.Election, and what runs
//	              only while leading (the watches, the throttle, liveness,
//	              ExecutorConfig.LeaderParts such as the balancer).
//	scheduler.go  which move runs next: settle moves left in flight, then
//	              a window of up to Parallelism moves of the applying plan,
//	              at most one copy of a slot holding data per donor.
//	move.go       one move from begin to commit or abort, its retries
//	              from the phase the directory recorded, a copy restarted
//	              when the source lost its change capture.
//	guard.go      an operator's pause or cancel applied to moves in flight.
//	transfer.go   the protocol itself: copy, catch-up, fence, drain,
//	              verify, commit; transfererr.go tells its errors apart
//	              and aborts.
//	cleanup.go    asking stores to drop handed-off copies, for a while;
//	              the stores' reconciliation is the guarantee.
//	balancer.go   the automatic balancer (a LeaderPart); autodecide.go is
//	              its pure decision.
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
