package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultReloadInterval bounds how often the token file is re-read on use.
const DefaultReloadInterval = 5 * time.Second

// ErrInvalid is returned for a Config that cannot work.
var ErrInvalid = errors.New("auth: invalid config")

// Config chooses where identities come from and what they may do.
type Config struct {
	// Policy maps methods to roles. Required when authorization is enabled.
	Policy *Policy
	// ClientCerts takes roles from verified client certificates (see
	// CertRoles). Set it when the listener verifies client certificates
	// (tlsconf ClientAuth request or require).
	ClientCerts bool
	// TokenFile holds bearer tokens, one "token role[,role] [name]" a line;
	// re-read on change. Empty: tokens are refused.
	TokenFile string
	// TrustDomain is the cluster name in role URIs and OUs; default
	// DefaultTrustDomain.
	TrustDomain string
	// RequireNodeIdentity refuses a store caller bound to no node id (see
	// CheckNode) the node calls: registration and heartbeats.
	RequireNodeIdentity bool
	// ReloadInterval bounds how often TokenFile is re-read; default
	// DefaultReloadInterval.
	ReloadInterval time.Duration
	// Logger receives denials and token file reloads; default: discard.
	Logger *slog.Logger
	// Registerer receives slotd_auth_requests_total{result}; nil: none.
	Registerer prometheus.Registerer
}

// Enabled reports whether any identity source is configured. Without one
// every caller may call every method: that is how the demo runs without
// DEMO_TLS, and why slotd should then listen on loopback only.
func (c Config) Enabled() bool { return c.ClientCerts || c.TokenFile != "" }

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	if c.Enabled() && c.Policy == nil {
		return fmt.Errorf("%w: authorization is enabled but no policy says who may call what", ErrInvalid)
	}
	if c.Policy != nil {
		if err := c.Policy.Validate(); err != nil {
			return err
		}
	}
	if strings.ContainsAny(c.TrustDomain, "/: ") {
		return fmt.Errorf("%w: trust domain %q must be a plain name like \"slotd\"", ErrInvalid, c.TrustDomain)
	}
	if c.ReloadInterval < 0 {
		return fmt.Errorf("%w: reload interval %v is negative", ErrInvalid, c.ReloadInterval)
	}
	return nil
}

// Authorizer checks every RPC against a Policy. Safe for concurrent use.
type Authorizer struct {
	cfg      Config
	tokens   *tokenFile // nil without a token file
	requests *prometheus.CounterVec
}

// New builds an Authorizer, loading the token file if there is one.
func New(cfg Config) (*Authorizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TrustDomain == "" {
		cfg.TrustDomain = DefaultTrustDomain
	}
	if cfg.ReloadInterval == 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Authorizer{cfg: cfg}
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slotd_auth_requests_total",
		Help: "RPCs checked by authorization, by result (allowed, denied, unauthenticated).",
	}, []string{"result"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.requests); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("auth: register metrics: %w", err)
			}
			a.requests = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	if cfg.TokenFile != "" {
		tf, err := newTokenFile(cfg.TokenFile, cfg.ReloadInterval, cfg.Logger)
		if err != nil {
			return nil, err
		}
		a.tokens = tf
	}
	if !cfg.Enabled() {
		cfg.Logger.Warn("authorization disabled: every caller may call every method (no client certificates, no token file)")
	}
	return a, nil
}

// Enabled reports whether requests are checked at all.
func (a *Authorizer) Enabled() bool { return a.cfg.Enabled() }

// Authorize decides whether the caller in ctx may call fullMethod. It
// returns ctx carrying the caller's Identity, or a status error:
// Unauthenticated when the caller proved no identity (or sent a bad token),
// PermissionDenied when it did but lacks the role. The interceptors call
// it; call it yourself only for a non-gRPC entry point.
func (a *Authorizer) Authorize(ctx context.Context, fullMethod string) (context.Context, error) {
	if !a.cfg.Enabled() {
		return ctx, nil
	}
	r, ok := a.cfg.Policy.lookup(fullMethod)
	if ok && r.public {
		a.requests.WithLabelValues("allowed").Inc()
		return ctx, nil
	}
	id, err := a.identify(ctx)
	if err != nil {
		a.requests.WithLabelValues("unauthenticated").Inc()
		a.cfg.Logger.Debug("rpc unauthenticated", "method", fullMethod, "err", err)
		return nil, status.Errorf(codes.Unauthenticated, "auth: %s: %v", fullMethod, err)
	}
	if id.Source == "" {
		a.requests.WithLabelValues("unauthenticated").Inc()
		a.cfg.Logger.Debug("rpc unauthenticated", "method", fullMethod, "err", "no identity")
		return nil, status.Errorf(codes.Unauthenticated,
			"auth: %s needs role %s; present a client certificate or an \"authorization: Bearer <token>\" header",
			fullMethod, needs(r, ok))
	}
	if !ok || !grants(id.Roles, r.roles) {
		a.requests.WithLabelValues("denied").Inc()
		// Warn: the caller holds valid credentials, so this is a
		// misconfiguration or a compromised identity worth seeing.
		a.cfg.Logger.Warn("rpc denied", "method", fullMethod, "caller", id.Name, "has", id.Roles.String(), "needs", needs(r, ok))
		return nil, status.Errorf(codes.PermissionDenied, "auth: %s needs role %s; caller %q has %s",
			fullMethod, needs(r, ok), id.Name, id.Roles)
	}
	a.requests.WithLabelValues("allowed").Inc()
	return context.WithValue(ctx, identityKey{}, id), nil
}

func grants(have RoleSet, any []Role) bool {
	for _, r := range any {
		if have.Grants(r) {
			return true
		}
	}
	return false
}

func needs(r rule, ok bool) string {
	if !ok {
		return "(none: no rule allows this method)"
	}
	parts := make([]string, len(r.roles))
	for i, x := range r.roles {
		parts[i] = string(x)
	}
	return strings.Join(parts, " or ")
}

// identify collects the caller's identity from its verified certificate and
// its bearer token. A zero Identity (Source "") means neither was presented.
func (a *Authorizer) identify(ctx context.Context) (Identity, error) {
	var id Identity
	var names []string
	if a.cfg.ClientCerts {
		if p, ok := peer.FromContext(ctx); ok {
			// Only a verified chain counts: PeerCertificates alone may hold
			// whatever the client sent.
			if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
				leaf := info.State.VerifiedChains[0][0]
				id.Roles |= CertRoles(leaf, a.cfg.TrustDomain)
				id.Nodes = append(id.Nodes, CertNodes(leaf, a.cfg.TrustDomain)...)
				id.Source = "certificate"
				names = append(names, certName(leaf))
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get("authorization"); len(vals) > 0 {
		if len(vals) > 1 {
			return Identity{}, errors.New("more than one authorization header")
		}
		scheme, tok, ok := strings.Cut(vals[0], " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
			return Identity{}, errors.New("authorization header is not \"Bearer <token>\"")
		}
		if a.tokens == nil {
			return Identity{}, errors.New("bearer tokens are not accepted by this server")
		}
		e, ok := a.tokens.lookup(strings.TrimSpace(tok))
		if !ok {
			return Identity{}, errors.New("unknown bearer token")
		}
		id.Roles |= e.roles
		id.Nodes = append(id.Nodes, e.nodes...)
		if id.Source == "" {
			id.Source = "token"
		} else {
			id.Source += "+token"
		}
		names = append(names, e.name)
	}
	id.Name = strings.Join(names, "+")
	id.nodeRequired = a.cfg.RequireNodeIdentity
	return id, nil
}

// UnaryInterceptor checks unary RPCs; a refused call never reaches the handler.
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := a.Authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// StreamInterceptor checks streaming RPCs before the handler runs.
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := a.Authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return h(srv, &identityStream{ServerStream: ss, ctx: ctx})
	}
}

// ServerOptions chains both interceptors; pass them to grpc.NewServer
// before any other interceptor so nothing runs for a refused call.
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(a.StreamInterceptor()),
	}
}

// identityStream carries the authorized context into a stream handler.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }
