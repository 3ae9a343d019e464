// Package clusterstatus is the one model of a cluster's status: the nodes
// with their slot counts, targets and measured load, the moves in flight,
// the applying plan, the nodes without a lease or with left copies, the
// hot spots. Build makes it from what a slotd answers (Admin.Status,
// Directory.ListNodes, Load.Get); `slotctl status -o json` prints it as it
// is (docs/slotctl-json.md) and the web console shows it under its own
// field names (docs/console.md), so the two always agree.
//
//	st, _ := admin.Status(ctx, &slotdv1.StatusRequest{})
//	ln, _ := dir.ListNodes(ctx, &slotdv1.ListNodesRequest{})
//	lv, _ := loads.Get(ctx, &slotdv1.GetLoadRequest{})
//	s := clusterstatus.Build(st, ln.GetNodes(), load.ViewFromProto(lv))
package clusterstatus
