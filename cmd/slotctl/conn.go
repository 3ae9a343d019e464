package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/internal/replicas"
	"github.com/slotd/slotd/tlsconf"
)

// conn is one connection to slotd, over every endpoint: gRPC's pick_first
// tries them in order, so a dead replica costs one failed connect, not a
// failed command.
type conn struct {
	cc    *grpc.ClientConn
	admin slotdv1.AdminClient
	dir   slotdv1.DirectoryClient
	op    slotdv1.OperatorClient
	load  slotdv1.LoadClient
	auto  slotdv1.AutoClient
}

func (c *conn) Close() error { return c.cc.Close() }

// dial connects to --endpoints with the TLS and token flags. Nothing is
// sent until the first call.
func (g *globals) dial() (*conn, error) {
	eps, scheme, err := g.parseEndpoints(g.endpoints)
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, usagef("--endpoints is empty; give slotd's host:port, e.g. --endpoints 127.0.0.1:7400")
	}
	var opts []grpc.DialOption
	useTLS := scheme == "https" || g.tlsCA != "" || g.tlsCert != "" || g.tlsKey != ""
	switch {
	case scheme == "http" && useTLS:
		return nil, usagef("--endpoints %s says http:// (plaintext) but TLS files are given; write https://", g.endpoints)
	case (g.tlsCert == "") != (g.tlsKey == ""):
		return nil, usagef("--tls-cert and --tls-key go together")
	case g.tokenFile != "" && !useTLS:
		return nil, usagef("--token-file needs TLS (--tls-ca): a bearer token must not cross plaintext")
	}
	if useTLS {
		tc, err := tlsconf.NewClient(tlsconf.Config{CAFile: g.tlsCA, CertFile: g.tlsCert, KeyFile: g.tlsKey})
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(tc.Credentials()))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if g.tokenFile != "" {
		tok, err := auth.NewTokenCredentials(g.tokenFile, false)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(tok))
	}
	if g.reason != "" {
		// Every call carries the operator's why; slotd records it in the
		// audit log with the change (grpcapi.ReasonMetadata).
		reason := g.reason
		opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "slotd-reason", reason), method, req, reply, cc, callOpts...)
		}))
	}
	cc, err := replicas.Dial("slotctl", eps, opts...)
	if errors.Is(err, replicas.ErrBadEndpoint) {
		return nil, usagef("%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to slotd at %s: %w", g.endpoints, err)
	}
	return &conn{cc: cc, admin: slotdv1.NewAdminClient(cc), dir: slotdv1.NewDirectoryClient(cc), op: slotdv1.NewOperatorClient(cc), load: slotdv1.NewLoadClient(cc), auto: slotdv1.NewAutoClient(cc)}, nil
}

// call bounds one request by --timeout.
func (g *globals) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.timeout)
}

// grpcStatus is what gRPC status errors implement.
type grpcStatus interface {
	error
	GRPCStatus() *status.Status
}

// fromRPC turns a gRPC error from slotd into the error slotctl prints: the
// server's message without the "rpc error: code = ... desc =" framing, a
// hint about what to do next, and refusedError for refusals (exit 3).
func fromRPC(err error, g *globals) error {
	var se grpcStatus
	if !errors.As(err, &se) {
		return err
	}
	st := se.GRPCStatus()
	msg := st.Message()
	if outer := err.Error(); outer != se.Error() {
		// Keep the command's context around the server's message.
		msg = strings.Replace(outer, se.Error(), msg, 1)
	}
	switch st.Code() {
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		return refusedError{errors.New(msg)}
	case codes.Unavailable:
		cause := transportCause(st.Message())
		if g.tlsCA == "" && g.tlsCert == "" && strings.Contains(cause, "server preface") {
			// A TLS listener hangs up on a plaintext client before its preface.
			return fmt.Errorf("cannot reach slotd at %s (%s); if slotd serves TLS, pass --tls-ca (and --token-file or --tls-cert/--tls-key)", g.endpoints, cause)
		}
		return fmt.Errorf("cannot reach slotd at %s (%s); check that slotd runs there, or pass --endpoints / SLOTCTL_ENDPOINTS", g.endpoints, cause)
	case codes.DeadlineExceeded:
		return fmt.Errorf("slotd at %s did not answer within %s; check its health (slotctl migrate) or raise --timeout", g.endpoints, g.timeout)
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%s; pass an admin credential: --token-file, or --tls-cert and --tls-key (with --tls-ca)", msg)
	case codes.Canceled:
		return errors.New("interrupted; a change already sent may have been made: check with slotctl status")
	case codes.Unimplemented:
		return fmt.Errorf("%s; this slotd does not offer the call (older server?)", msg)
	}
	return errors.New(msg)
}

// transportCause keeps the useful end of gRPC's nested transport message,
// e.g. "connect: connection refused".
func transportCause(msg string) string {
	msg = strings.TrimSpace(strings.ReplaceAll(msg, `"`, ""))
	if i := strings.LastIndex(msg, "dial tcp "); i >= 0 {
		return msg[i:]
	}
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		return msg[i+len("desc = "):]
	}
	return msg
}

// withConn dials slotd, runs fn and closes the connection.
func (g *globals) withConn(ctx context.Context, fn func(ctx context.Context, c *conn) error) error {
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// activePlanID returns the id of the plan applying or paused, for commands
// whose plan id is optional; refusedError when there is none.
func (g *globals) activePlanID(ctx context.Context, c *conn, verb string) (string, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	st, err := c.admin.Status(cctx, &slotdv1.StatusRequest{})
	if err != nil {
		return "", err
	}
	if st.GetActivePlan() == nil {
		return "", refusedError{fmt.Errorf("no plan is applying or paused; nothing to %s (see slotctl status)", verb)}
	}
	return st.GetActivePlan().GetId(), nil
}
