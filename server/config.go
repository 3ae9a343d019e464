package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/mover/planner"
)

// ErrInvalidConfig marks the errors of Config.Validate: the configuration
// cannot work (cmd/slotd exits with its usage code for them).
var ErrInvalidConfig = errors.New("server: invalid configuration")

// Config is a slotd server's configuration. Each field is one of slotd's
// flags (named in its comment); start from DefaultConfig.
type Config struct {
	// DataDir is the embedded etcd's data directory (--data-dir); unused
	// with EtcdEndpoints.
	DataDir string
	// EtcdEndpoints names an existing etcd cluster (--etcd-endpoints); no
	// embedded etcd then.
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix of this cluster's directory in etcd
	// (--etcd-prefix, default directory.DefaultPrefix): several clusters
	// can share one etcd under disjoint prefixes.
	EtcdPrefix string
	// EtcdClientURL and EtcdPeerURL are the embedded etcd's listeners
	// (--etcd-client-url, --etcd-peer-url), "host:port" or URLs.
	EtcdClientURL, EtcdPeerURL string
	// Listen is the gRPC listen address (--listen); port 0 picks one (see
	// GRPCAddr).
	Listen string
	// HTTP is the listen address of /metrics, /healthz and /readyz
	// (--http); empty disables it.
	HTTP string
	// Name is this replica's id in the mover election and in status
	// (--name).
	Name string
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// ServingLogAttrs are extra fields of the "slotd serving" log line
	// (cmd/slotd adds the GOGC in force).
	ServingLogAttrs []any

	// TLSCert and TLSKey enable TLS on the gRPC and HTTP listeners
	// (--tls-cert, --tls-key); TLSCA verifies client certificates (roles)
	// and store nodes (--tls-ca); ClientAuth is none, request or require
	// (--client-auth; default request with TLSCA, else none).
	TLSCert, TLSKey, TLSCA, ClientAuth string
	// TokenFile holds bearer tokens (--token-file); needs TLS.
	TokenFile string
	// RequireNodeIdentity refuses registration and heartbeats from a store
	// identity bound to no node id (--require-node-identity).
	RequireNodeIdentity bool
	// EtcdTLSCert, EtcdTLSKey and EtcdTLSCA are slotd's TLS to etcd
	// (--etcd-tls-cert, --etcd-tls-key, --etcd-tls-ca); without
	// EtcdEndpoints the embedded etcd serves TLS with them.
	EtcdTLSCert, EtcdTLSKey, EtcdTLSCA string
	// StoreTLSCert and StoreTLSKey are the client certificate (role store)
	// the mover presents to store nodes (--store-tls-cert, --store-tls-key).
	StoreTLSCert, StoreTLSKey string

	// RequestTimeout is the deadline of each etcd request
	// (--request-timeout).
	RequestTimeout time.Duration
	// DownAfter marks a node without heartbeats this long down
	// (--down-after); HoldDown keeps a node that came back down this long
	// (--hold-down).
	DownAfter, HoldDown time.Duration
	// LeaseMargin is the safety margin of a store's lease (--lease-margin;
	// 0: DownAfter/10): a store stops serving DownAfter - LeaseMargin after
	// its last renewal, and is marked down, or may be declared failed,
	// only DownAfter + LeaseMargin after it (docs/leases.md).
	LeaseMargin time.Duration
	// MaxRecvBytes is the largest gRPC request accepted (--max-recv-bytes).
	MaxRecvBytes int
	// ShutdownTimeout is how long shutdown waits for RPCs before cutting
	// them (--shutdown-timeout).
	ShutdownTimeout time.Duration
	// MoveParallelism caps how many moves of a plan the mover runs at once
	// (--move-parallelism); at every value a donor copies at most one slot
	// holding data at a time (mover.ExecutorConfig.Parallelism).
	MoveParallelism int
	// MoveRetryFor is how long the mover retries a move whose store or etcd
	// is away before it pauses the plan (--move-retry-for).
	MoveRetryFor time.Duration
	// BalancerTick is how often the automatic balancer decides on the
	// mover's leader (--balancer-tick); its policy is in the directory
	// (slotctl auto), off by default.
	BalancerTick time.Duration
	// BalanceBy is what a plan balances when its request does not say
	// (--balance-by): slots, bytes, ops or auto (bytes and ops together,
	// slot counts until a node reports its load).
	BalanceBy planner.BalanceBy

	// DisableMover serves the API without running the mover: plans are
	// stored and stay where the API leaves them. No flag; tests use it to
	// keep their output deterministic.
	DisableMover bool
	// TuneMover, when set, edits the mover executor's configuration before
	// it is built. No flag; tests shorten its retries with it.
	TuneMover func(*mover.ExecutorConfig)
}

// DefaultConfig returns slotd's defaults (those of its flags).
func DefaultConfig() Config {
	return Config{
		DataDir:         "slotd-data",
		EtcdPrefix:      directory.DefaultPrefix,
		EtcdClientURL:   "127.0.0.1:7479",
		EtcdPeerURL:     "127.0.0.1:7480",
		Listen:          "127.0.0.1:7400",
		HTTP:            "127.0.0.1:7401",
		Name:            DefaultName(),
		RequestTimeout:  directory.DefaultRequestTimeout,
		DownAfter:       directory.DefaultDownAfter,
		HoldDown:        directory.DefaultHoldDown,
		MaxRecvBytes:    auth.DefaultMaxRecvMsgSize,
		ShutdownTimeout: 10 * time.Second,
		MoveParallelism: mover.DefaultParallelism,
		MoveRetryFor:    mover.DefaultMoveRetryFor,
		BalancerTick:    mover.DefaultBalancerTick,
		BalanceBy:       planner.BalanceAuto,
	}
}

// DefaultName is a replica name unique on this host: hostname-pid.
func DefaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "slotd"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// Validate reports a configuration that cannot work, naming the flags
// involved; the error wraps ErrInvalidConfig.
func (c *Config) Validate() error {
	var msg string
	switch {
	case c.Listen == "":
		msg = "--listen is required"
	case len(c.EtcdEndpoints) == 0 && c.DataDir == "":
		msg = "--data-dir is required for the embedded etcd (or give --etcd-endpoints)"
	case c.TokenFile != "" && c.TLSCert == "":
		msg = "--token-file needs --tls-cert and --tls-key: bearer tokens must not cross plaintext"
	case c.RequireNodeIdentity && c.TLSCA == "" && c.TokenFile == "":
		msg = "--require-node-identity needs identities: give --tls-ca (client certificates) or --token-file"
	case len(c.EtcdEndpoints) == 0 && (c.EtcdTLSKey != "" || c.EtcdTLSCA != "") && c.EtcdTLSCert == "":
		msg = "the embedded etcd serves TLS with --etcd-tls-cert and --etcd-tls-key (a server and client certificate, like certs/server.pem); --etcd-tls-ca alone is not enough"
	case c.RequestTimeout <= 0 || c.DownAfter <= 0 || c.HoldDown < 0 || c.ShutdownTimeout <= 0:
		msg = "--request-timeout, --down-after and --shutdown-timeout must be positive, --hold-down not negative"
	case c.LeaseMargin < 0 || 2*c.LeaseMargin >= c.DownAfter:
		msg = fmt.Sprintf("--lease-margin %v must be at least 0 and less than half of --down-after %v", c.LeaseMargin, c.DownAfter)
	case c.EtcdPrefix != "" && directory.ValidatePrefix(c.EtcdPrefix) != nil:
		msg = "--etcd-prefix: " + strings.TrimPrefix(directory.ValidatePrefix(c.EtcdPrefix).Error(), directory.ErrInvalid.Error()+": ")
	case c.MaxRecvBytes < 0:
		msg = "--max-recv-bytes must not be negative"
	case c.MoveParallelism < 1 || c.MoveParallelism > mover.MaxParallelism:
		msg = fmt.Sprintf("--move-parallelism %d is not in 1-%d", c.MoveParallelism, mover.MaxParallelism)
	case c.MoveRetryFor < 0:
		msg = fmt.Sprintf("--move-retry-for %s is negative", c.MoveRetryFor)
	case c.BalancerTick <= 0:
		msg = "--balancer-tick must be positive, e.g. --balancer-tick 5s"
	case func() bool { _, err := planner.ParseBalanceBy(string(c.BalanceBy)); return err != nil }():
		msg = fmt.Sprintf("--balance-by %q: want slots, bytes, ops or auto", c.BalanceBy)
	case (c.TLSKey != "" || c.TLSCA != "") && c.TLSCert == "":
		msg = "--tls-ca and --client-auth need --tls-cert and --tls-key"
	default:
		return nil
	}
	return &configError{msg}
}

// configError is a Validate error: its text is the message alone (it names
// the flags), and it is ErrInvalidConfig for errors.Is.
type configError struct{ msg string }

func (e *configError) Error() string        { return e.msg }
func (e *configError) Is(target error) bool { return target == ErrInvalidConfig }
