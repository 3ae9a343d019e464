package grpcapi

import "github.com/slotd/slotd/auth"

// Policy returns who may call what on a slotd server: reading and watching
// the map (and the read-only Admin calls) needs read; every other Admin call
// needs admin; store nodes register and heartbeat with store; health is
// public. Reflection describes the API, so it needs read too.
func Policy() *auth.Policy {
	return auth.NewPolicy().
		Require("/slotd.v1.Directory/*", auth.RoleRead).
		Require("/slotd.v1.Admin/*", auth.RoleAdmin).
		Require("/slotd.v1.Info/*", auth.RoleRead).
		Require("/slotd.v1.Admin/Status", auth.RoleRead).
		Require("/slotd.v1.Admin/GetPlan", auth.RoleRead).
		Require("/slotd.v1.Admin/ListPlans", auth.RoleRead).
		Require("/slotd.v1.Admin/History", auth.RoleRead).
		Require("/slotd.v1.Admin/GetReplication", auth.RoleRead).
		Require("/slotd.v1.Admin/ListReplicaSets", auth.RoleRead).
		Require("/slotd.v1.Admin/RegisterNode", auth.RoleStore, auth.RoleAdmin).
		Require("/slotd.v1.Admin/Heartbeat", auth.RoleStore).
		Require("/slotd.v1.Load/Report", auth.RoleStore).
		Require("/slotd.v1.Load/Get", auth.RoleRead).
		Require("/slotd.v1.Auto/*", auth.RoleAdmin).
		Require("/slotd.v1.Auto/Status", auth.RoleRead).
		Require("/slotd.v1.Recovery/*", auth.RoleAdmin).
		Require("/slotd.v1.Recovery/FreshMap", auth.RoleRead, auth.RoleStore).
		Require("/slotd.v1.Operator/*", auth.RoleAdmin).
		Require("/slotd.v1.Operator/Log", auth.RoleRead).
		Require("/grpc.reflection.v1.ServerReflection/*", auth.RoleRead).
		Require("/grpc.reflection.v1alpha.ServerReflection/*", auth.RoleRead).
		Public("/grpc.health.v1.Health/*")
}
