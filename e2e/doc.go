// Package e2e runs slotd's real binaries as separate processes and checks
// the guarantees README.md states (listed, with where each is tested, in
// docs/architecture.md) under faults.
//
// Every scenario runs a real three-member etcd cluster as three `slotd etcd`
// processes (our embedded-etcd runner rather than Debian's etcd-server: the
// same etcd version as the library slotd links, no apt package or root, and
// members that can be stopped and killed like any process), one or two
// slotd replicas over it, and slotkv nodes; keys are loaded with `slotkv
// load`, and an in-process SDK workload (package slotkv/workload) records a
// history while the scenario moves slots and injects its fault. Afterwards:
//
//   - every acknowledged write is readable with its latest value (the
//     workload's final reads, `slotkv check` for the loaded keys);
//   - every slot has exactly one owner, every slotd serves the same settled
//     map, and no version (the directory's, a replica's, a slot's) went back;
//   - every node serves the slots it owns and answers MOVED, naming the
//     owner, for slots it does not;
//   - the history is linearizable per key (package e2e/linz, porcupine); on
//     failure an HTML visualization is written to $E2E_ARTIFACTS (default
//     $TMPDIR/slotd-e2e-artifacts), next to the history as JSON.
//
// The scenarios: 1 rebalance 3->4 nodes; 2 drain a node and remove it;
// 3 SIGKILL the slotd leading the mover mid-copy; 4 SIGKILL the source node
// mid-copy and restart it; 5 SIGKILL the target mid-catch-up and restart it;
// 6 SIGSTOP the source for 5 s at cutover; 7 stop the etcd leader during a
// plan; 8 roll back a finished plan; 9 (recovery_test.go, nodes reconciling
// fast): (a) SIGKILL a node, delete its data, declare it failed, bring a
// copy of its old data back under its id; (b) SIGKILL the mover's slotd and
// the draining node together mid-drain; (c) SIGSTOP a fenced source past
// down-after; (d) SIGKILL the mover leader right after commits. Scenario 9
// ends with every node reporting 0 orphan bytes. 12 (partition_test.go,
// store leases, docs/leases.md): TCP proxies (harness.Proxy) on both paths between a node and
// slotd are cut while an application still reaches the node directly; it
// is declared failed and must acknowledge none of that application's
// writes from then on, and rejoins empty once healed. 13 (firstminute_test.go,
// plans made on what the stores hold now): 60,000 keys of skewed data loaded, a fourth node started and
// a plan made at once, before the load reports caught up: (a) `slotctl
// rebalance`, (b) the automatic balancer balancing bytes, (c) the same in
// its default mode (bytes and ops); every node ends within 10% of the mean
// in bytes by the stores' own figures, the load view reads the plan's
// after within one report interval, and (b, c) no second automatic plan
// follows.
//
// `go test ./e2e` (and `make test`) runs 1 (on a 256-move sample of the
// plan), 3, 9 (a), 12 and 13 (a); E2E_FULL=1 runs all of them with the full rebalance
// (`make e2e`), and prints a table: scenario, operations, client errors,
// lost writes, linearizable, time.
package e2e
