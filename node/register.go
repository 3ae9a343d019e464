package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/backoff"
)

// RegistrarConfig configures a Registrar.
type RegistrarConfig struct {
	// Admin is slotd's Admin client (required).
	Admin slotdv1.AdminClient
	// Node is what to register: id and address required, zone and weight
	// as the operator chose.
	Node *slotdv1.Node
	// MinBackoff and MaxBackoff bound the jittered exponential wait between
	// attempts while slotd is unreachable (defaults 100ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// OrphanBytes, when set, is sent with every heartbeat (Node.OrphanBytes),
	// so that slotctl status shows what each node has left to clean up.
	OrphanBytes func() int64
	// OnRegistered, when set, gets the directory version of every
	// successful registration (Node.RequireMapVersion: a node never acts on
	// a map from before it joined).
	OnRegistered func(version uint64)
	// Lease, when set, is renewed by every registration and heartbeat that
	// succeeds, and dropped when slotd says it is gone; give the same one
	// to the Node (Config.Lease), which serves only while it holds.
	Lease *Lease
}

// Validate reports the first missing or bad field.
func (c *RegistrarConfig) Validate() error {
	switch {
	case c.Admin == nil:
		return errors.New("node: RegistrarConfig.Admin is required")
	case c.Node == nil || c.Node.GetId() == "" || c.Node.GetAddress() == "":
		return errors.New("node: RegistrarConfig.Node needs an id and an address")
	case c.MinBackoff < 0 || c.MaxBackoff < 0 || (c.MaxBackoff > 0 && c.MaxBackoff < c.MinBackoff):
		return errors.New("node: RegistrarConfig backoffs must be positive with MinBackoff <= MaxBackoff")
	}
	return nil
}

// Registrar registers a node with slotd and keeps its liveness session alive
// with heartbeats. While slotd is unreachable it retries with backoff; when a
// heartbeat says the session expired it registers again.
type Registrar struct {
	cfg RegistrarConfig
	lg  *slog.Logger

	// incarnation names this Registrar's process to slotd, and attempts
	// counts its registrations: a registration that reaches slotd after a
	// later one (its call timed out here) does not take the later one's
	// lease.
	incarnation string
	attempts    uint64

	mu         sync.Mutex // guards the fields below
	registered bool
	state      slotdv1.NodeState
	version    uint64
}

// NewRegistrar checks cfg and returns a Registrar; call Run.
func NewRegistrar(cfg RegistrarConfig) (*Registrar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &Registrar{cfg: cfg, lg: cfg.Logger.With("node", cfg.Node.GetId()), incarnation: hex.EncodeToString(inc[:])}, nil
}

// Registered reports whether the node holds a live session, with its state
// and the directory version of the last answer.
func (r *Registrar) Registered() (ok bool, state slotdv1.NodeState, version uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered, r.state, r.version
}

func (r *Registrar) set(ok bool, state slotdv1.NodeState, version uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registered, r.state = ok, state
	if version > r.version {
		r.version = version
	}
}

// registerTimeout bounds one registration attempt: a connection that
// hangs (a partition that drops packets) must not stop the retries.
const registerTimeout = 10 * time.Second

// now reads the lease's clock (the real one without a lease): a renewal's
// time is read before its request goes out.
func (r *Registrar) now() time.Time {
	if r.cfg.Lease != nil {
		return r.cfg.Lease.clock.Now()
	}
	return time.Now()
}

// Run registers and heartbeats until ctx is done.
func (r *Registrar) Run(ctx context.Context) error {
	bo := backoff.Backoff{Initial: r.cfg.MinBackoff, Max: r.cfg.MaxBackoff, Jitter: 0.5}
	wait := func() bool { return bo.Sleep(ctx) }
	for {
		sent := r.now()
		rctx, cancel := context.WithTimeout(ctx, registerTimeout)
		r.attempts++
		resp, err := r.cfg.Admin.RegisterNode(rctx, &slotdv1.RegisterNodeRequest{Node: r.cfg.Node, Incarnation: r.incarnation, Attempt: r.attempts})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.lg.Warn("node registration failed; retrying", "err", err)
			if !wait() {
				return nil
			}
			continue
		}
		bo.Reset()
		// The map first: once the lease holds, the node serves from a map
		// at least as new as this registration, never an older one.
		if r.cfg.OnRegistered != nil {
			r.cfg.OnRegistered(resp.GetVersion())
		}
		r.renewed(resp, sent)
		r.set(true, resp.GetNode().GetState(), resp.GetVersion())
		r.lg.Info("node registered", "state", resp.GetNode().GetState().String(), "version", resp.GetVersion(),
			"lease_ttl", resp.GetTtl().AsDuration(), "lease_margin", resp.GetLeaseMargin().AsDuration())
		if !r.heartbeat(ctx, resp) {
			return nil
		}
		r.set(false, slotdv1.NodeState_NODE_STATE_UNSPECIFIED, 0)
	}
}

// renewed extends the lease by what reg granted, counted from sent.
func (r *Registrar) renewed(reg *slotdv1.RegisterNodeResponse, sent time.Time) {
	if r.cfg.Lease != nil {
		r.cfg.Lease.Renewed(reg.GetLeaseId(), sent, reg.GetTtl().AsDuration(), reg.GetLeaseMargin().AsDuration())
	}
}

// heartbeat renews the lease reg granted every heartbeat interval; it
// returns false when ctx is done and true when the lease is gone and the
// node must register again.
func (r *Registrar) heartbeat(ctx context.Context, reg *slotdv1.RegisterNodeResponse) bool {
	interval := reg.GetHeartbeatInterval().AsDuration()
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		req := &slotdv1.HeartbeatRequest{NodeId: r.cfg.Node.GetId(), Session: reg.GetSession(), LeaseId: reg.GetLeaseId()}
		if r.cfg.OrphanBytes != nil {
			b := r.cfg.OrphanBytes()
			req.OrphanBytes = &b
		}
		sent := r.now()
		// One interval at most: a renewal stuck on a dead connection must
		// not hold back the next one.
		hctx, cancel := context.WithTimeout(ctx, interval)
		resp, err := r.cfg.Admin.Heartbeat(hctx, req)
		cancel()
		switch {
		case err == nil:
			r.renewed(reg, sent)
			r.set(true, resp.GetState(), resp.GetVersion())
		case ctx.Err() != nil:
			return false
		case status.Code(err) == codes.NotFound:
			// Slotd let the lease go: the node may have been declared
			// failed. Serve nothing until a registration grants another.
			if r.cfg.Lease != nil {
				r.cfg.Lease.Lost()
			}
			r.lg.Warn("node lease is gone; registering again", "err", err)
			return true
		default:
			// slotd may be restarting; the session survives until its TTL,
			// so keep beating at the same pace.
			r.lg.Warn("heartbeat failed", "err", err)
		}
	}
}
