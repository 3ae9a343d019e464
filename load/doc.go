// Package load holds what a slotd replica knows of its store nodes'
// measured load: the last report of each node, checked, in memory.
//
// Every node reports to every replica (node.Reporter), so whichever
// replica leads the mover has the aggregate at once; none of it is in etcd,
// which holds the table and the policy, not the load stream. A report
// replaces the node's previous one and expires after three of the node's
// report intervals: a node whose report expired, or that never reported,
// is unknown, never zero (it is missing from NodeLoads and marked unknown
// in View).
//
// A report is refused whole, with nothing changed, when a value is
// negative, NaN or infinite, a slot is out of range or listed twice, a slot
// was not the node's at the report's map version (ErrInvalid), the node is
// not registered (ErrUnknownNode), or this replica's map is older than the
// report (ErrBehind: the node reports again at its next interval).
//
//	agg, err := load.New(load.Config{Map: hub}) // server.New does this over its grpcapi.Hub
//	err = agg.Report(time.Now(), req)           // from the Load.Report RPC
//	loads := agg.NodeLoads(time.Now())          // the planner's input
//	view := agg.View(time.Now(), load.ViewOptions{}) // Load.Get: slotctl status and top
//	reg.MustRegister(agg.Collector())           // slotd_node_load, _ratio, _known, slotd_hot_slots
package load
