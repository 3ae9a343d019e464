// Package tlsconf turns a few PEM file names into TLS configurations for
// slotd's listeners (gRPC, HTTP), its clients (slotctl, the SDK, store
// nodes) and its etcd connection, and picks up new files without a restart.
//
// Reloading: every handshake asks for the current files; they are re-read
// at most once per Config.ReloadInterval (default 5s) and only swapped in
// when the contents changed and the new set parses (key matches
// certificate, not expired, CA has certificates). A bad set is logged once
// and the previous one keeps serving, so a half-finished rotation never
// breaks new connections. Existing connections keep the certificate they
// were made with. There is no goroutine to run: Reload forces a re-read,
// e.g. on SIGHUP.
//
// Mutual TLS is chosen per listener by Config.ClientAuth: none, request
// (verified if presented; clients may use a bearer token instead, see
// package auth) or require. A certificate that does not verify against
// CAFile is always refused during the handshake.
//
// Errors are one line naming the file and the problem, wrapping ErrInvalid
// (the Config) or ErrLoad (the files).
//
// A gRPC server:
//
//	cfg := tlsconf.Config{CertFile: "certs/server.pem", KeyFile: "certs/server-key.pem",
//		CAFile: "certs/ca.pem", ClientAuth: tlsconf.ClientAuthRequest, Logger: lg}
//	ts, err := tlsconf.NewServer(cfg)
//	if err != nil { return err }
//	srv := grpc.NewServer(grpc.Creds(ts.Credentials()))
//
// The HTTP (metrics) listener on the same files:
//
//	hs := &http.Server{Handler: mux, TLSConfig: ts.TLSConfig()}
//	go hs.ServeTLS(ln, "", "")
//
// A gRPC client with a client certificate:
//
//	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: "certs/admin.pem",
//		KeyFile: "certs/admin-key.pem", CAFile: "certs/ca.pem"})
//	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc.Credentials()))
//
// An etcd client (endpoints must be https://):
//
//	cc := clientv3.Config{Endpoints: eps}
//	tc.ConfigureEtcd(&cc)
//	cli, err := clientv3.New(cc)
//
// An embedded etcd member serving TLS:
//
//	ecfg.ClientTLSInfo = etcdTLS.EtcdServerTLSInfo() // etcdTLS is a Config
//
// Without any file configured (Config.Enabled() == false) the caller should
// use plaintext: that is how the demo runs unless DEMO_TLS=1.
package tlsconf
