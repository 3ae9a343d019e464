// Command slotctl is the operator's CLI for slotd: inspect the slot map, add
// and drain nodes, plan, apply, throttle, pause and roll back rebalances.
//
// Every command that prints data takes -o table (default) or -o json; the
// JSON shapes are stable and documented on each command's output type and
// in docs/slotctl-json.md. A plan is printed everywhere in one form, the
// protojson of slotd.v1.Plan, which is also the plan file apply reads.
//
// Exit codes: 0 success; 1 failure (slotd unreachable, not found, a plan
// failed, a wait interrupted by Ctrl-C); 2 usage error (nothing was sent);
// 3 refused: the cluster changed or a precondition failed (gRPC
// FailedPrecondition, Aborted, AlreadyExists), nothing changed. Errors are
// one line on stderr saying what to do next.
//
// The demo walk-through (slotd on 127.0.0.1:7400, store nodes n1-n3, n4
// joining at 127.0.0.1:7504):
//
//	slotctl status
//	slotctl plan --add n4=127.0.0.1:7504 -o json > plan.json
//	slotctl apply plan.json --wait
//	slotctl watch                     # in another terminal
//	slotctl rollback --last --wait
//
// Layout: one file per command (an options struct and RunE, registered in
// init with register or registerNodes); conn.go dials slotd and turns gRPC
// errors into slotctl's; wait.go follows a plan with a progress display.
package main
