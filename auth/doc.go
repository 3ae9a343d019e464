// Package auth decides who may call which gRPC method of slotd and slotkv.
//
// Three roles (see Role): read (read and watch the map), admin (nodes,
// plans, throttle, moves, rollback, bootstrap; implies read) and store (the
// migration protocol between slotd and stores, node registration and
// heartbeats).
//
// A caller's roles come from
//
//   - its client certificate, verified by the TLS handshake (package
//     tlsconf): every URI SAN spiffe://<trust domain>/role/<role> and every
//     subject OU "<trust domain>/role/<role>" grants <role> (see CertRoles;
//     trust domain "slotd" by default), and/or
//   - an "authorization: Bearer <token>" header, checked in constant time
//     against a token file of lines "token role[,role][,node:ID] [name]"
//     that is re-read when it changes (a bad edit keeps the previous tokens).
//
// Both together grant the union. A Policy maps full method names to the
// roles that may call them; methods without a rule are denied. The
// interceptors answer Unauthenticated when the caller proved no identity or
// sent a bad token, PermissionDenied (naming the method and the role needed)
// when it lacks the role; either way the handler never runs.
//
// A store identity may be bound to node ids (certificate URI SANs
// spiffe://<trust domain>/node/<id>, token items node:<id>); CheckNode, which
// slotd calls on registration and heartbeats, then lets it act as those
// nodes only, and Config.RequireNodeIdentity refuses unbound ones.
//
// With neither client certificates nor a token file configured
// (Config.Enabled() == false) everything is allowed: the demo runs so unless
// DEMO_TLS=1, and such a server must only listen on loopback.
//
// Wiring a slotd server:
//
//	policy := auth.NewPolicy().
//		Require("/slotd.v1.Directory/*", auth.RoleRead).
//		Require("/slotd.v1.Admin/*", auth.RoleAdmin).
//		Require("/slotd.v1.Admin/RegisterNode", auth.RoleStore).
//		Require("/slotd.v1.Admin/Heartbeat", auth.RoleStore).
//		Require("/slotd.v1.Store/*", auth.RoleStore).
//		Public("/grpc.health.v1.Health/*")
//	az, err := auth.New(auth.Config{
//		Policy:      policy,
//		ClientCerts: tlsCfg.VerifiesClientCerts(), // tlsCfg is the listener's tlsconf.Config
//		TokenFile:   flags.TokenFile,
//		Logger:      lg,
//		Registerer:  reg,
//	})
//	if err != nil { return err }
//	opts := append(az.ServerOptions(), auth.Limits{}.ServerOptions()...)
//	opts = append(opts, grpc.Creds(tlsServer.Credentials()))
//	srv := grpc.NewServer(opts...)
//	slotdv1.RegisterAdminServer(srv, ...) // and the others
//	if m := policy.Uncovered(srv.GetServiceInfo()); len(m) > 0 {
//		return fmt.Errorf("auth: no rule for %v", m) // they would be denied to everyone
//	}
//
// Handlers learn the caller (e.g. the operator for history) with
// auth.Operator(ctx) or auth.FromContext(ctx).
//
// A client with a token:
//
//	tok, err := auth.NewTokenCredentials("certs/admin.token", false)
//	conn, err := grpc.NewClient(addr,
//		grpc.WithTransportCredentials(tlsClient.Credentials()),
//		grpc.WithPerRPCCredentials(tok))
package auth
