package client

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Options configures a Client. Zero fields take the defaults listed.
type Options struct {
	// Endpoints are slotd gRPC addresses (host:port); at least one.
	Endpoints []string
	// DialOptions are passed to grpc.NewClient for every endpoint.
	// Default: plaintext (insecure transport credentials).
	DialOptions []grpc.DialOption
	// Logger receives connection and map events. Default: discard.
	Logger *slog.Logger
	// Registerer receives the client's metrics. Nil: metrics are kept but
	// not registered. Two clients on one registry need
	// prometheus.WrapRegistererWith to tell them apart.
	Registerer prometheus.Registerer

	// MaxAttempts bounds the requests Do sends for one call, not counting
	// those answered FENCED (see FenceWait). Default 5.
	MaxAttempts int
	// RetryBackoff is Do's first wait before retrying after a stale redirect
	// or a fenced slot; it doubles per attempt up to MaxRetryBackoff, with
	// jitter. Defaults 5ms and 200ms.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// FenceWait is how long Do rides through a fenced slot: a store answers
	// FENCED while a move's last step holds the slot's writes, which lasts
	// as long as the mover's commit takes (milliseconds, or an etcd leader
	// election when one is under way). Do retries such a slot, after the
	// store's hint or the backoff, until FenceWait has passed since the
	// first FENCED answer of the call, and only then returns ErrSlotFenced;
	// FENCED answers do not count against MaxAttempts. Default 10s.
	FenceWait time.Duration

	// ReconnectBackoff is the first wait before reopening a broken watch; it
	// doubles up to MaxReconnectBackoff, with jitter, and resets after a
	// stream delivers an update. Defaults 50ms and 5s.
	ReconnectBackoff    time.Duration
	MaxReconnectBackoff time.Duration

	// KeepaliveTime is how long a connection may be silent before the client
	// pings slotd, and KeepaliveTimeout how long it then waits for the
	// answer before it drops the connection and its watch fails over. Without
	// pings a watch on a peer that vanished without a reset would hang.
	// slotd must permit pings this often (see the Directory service comment).
	// Defaults 30s and 10s.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration

	// Zone is the availability zone the client runs in, as the store nodes
	// name theirs. Replicas lists a slot's in-sync replicas in this zone
	// first. Default "": the in-sync replicas in their order, the primary
	// first.
	Zone string

	// FetchTimeout bounds one GetMap call. Default 5s.
	FetchTimeout time.Duration
	// MinFetchInterval spaces the map fetches that redirects trigger, so a
	// burst of MOVED answers costs one fetch. Default 100ms.
	MinFetchInterval time.Duration
}

// ErrBadOptions is returned by Options.Validate (and New) for an invalid field.
var ErrBadOptions = errors.New("client: bad options")

// Validate reports the first invalid field.
func (o Options) Validate() error {
	if len(o.Endpoints) == 0 {
		return fmt.Errorf("%w: no endpoints; pass at least one slotd address", ErrBadOptions)
	}
	for _, e := range o.Endpoints {
		if e == "" {
			return fmt.Errorf("%w: empty endpoint", ErrBadOptions)
		}
	}
	if o.MaxAttempts < 0 {
		return fmt.Errorf("%w: MaxAttempts %d is negative", ErrBadOptions, o.MaxAttempts)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RetryBackoff", o.RetryBackoff}, {"MaxRetryBackoff", o.MaxRetryBackoff}, {"FenceWait", o.FenceWait},
		{"ReconnectBackoff", o.ReconnectBackoff}, {"MaxReconnectBackoff", o.MaxReconnectBackoff},
		{"FetchTimeout", o.FetchTimeout}, {"MinFetchInterval", o.MinFetchInterval},
		{"KeepaliveTime", o.KeepaliveTime}, {"KeepaliveTimeout", o.KeepaliveTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrBadOptions, d.name, d.v)
		}
	}
	if o.MaxRetryBackoff > 0 && o.RetryBackoff > o.MaxRetryBackoff {
		return fmt.Errorf("%w: RetryBackoff %v exceeds MaxRetryBackoff %v", ErrBadOptions, o.RetryBackoff, o.MaxRetryBackoff)
	}
	if o.MaxReconnectBackoff > 0 && o.ReconnectBackoff > o.MaxReconnectBackoff {
		return fmt.Errorf("%w: ReconnectBackoff %v exceeds MaxReconnectBackoff %v", ErrBadOptions, o.ReconnectBackoff, o.MaxReconnectBackoff)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.DialOptions == nil {
		o.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	def(&o.RetryBackoff, 5*time.Millisecond)
	def(&o.MaxRetryBackoff, 200*time.Millisecond)
	def(&o.FenceWait, 10*time.Second)
	def(&o.ReconnectBackoff, 50*time.Millisecond)
	def(&o.MaxReconnectBackoff, 5*time.Second)
	def(&o.FetchTimeout, 5*time.Second)
	def(&o.KeepaliveTime, 30*time.Second)
	def(&o.KeepaliveTimeout, 10*time.Second)
	def(&o.MinFetchInterval, 100*time.Millisecond)
	if o.RetryBackoff > o.MaxRetryBackoff {
		o.MaxRetryBackoff = o.RetryBackoff
	}
	if o.ReconnectBackoff > o.MaxReconnectBackoff {
		o.MaxReconnectBackoff = o.ReconnectBackoff
	}
	return o
}
