package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvclient"
)

// ErrInvalid is returned by Config.Validate and New.
var ErrInvalid = errors.New("workload: invalid config")

// Kind is an operation's type.
type Kind uint8

// Operation kinds.
const (
	Get Kind = iota + 1
	Put
	CAS
)

func (k Kind) String() string {
	switch k {
	case Get:
		return "get"
	case Put:
		return "put"
	case CAS:
		return "cas"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Op is one recorded operation.
type Op struct {
	Client int
	Kind   Kind
	Key    string
	// Value is what Put or CAS wrote.
	Value string
	// Expected is CAS's expected version.
	Expected uint64
	// Call and Return are nanoseconds since the workload started, read from
	// the monotonic clock just before sending and just after the answer.
	Call, Return int64

	// Err is the error's text when the call failed. Unknown says the outcome
	// is not known (a failed write may or may not have been applied);
	// Refused says every attempt was refused with a redirect or a fence,
	// so nothing was applied.
	Err     string
	Unknown bool
	Refused bool
	// Final marks the reads of Workload.Final.
	Final bool

	// Results when Err is empty.
	Found   bool   // Get
	Got     string // Get's value
	Version uint64 // the key's version after the call (Get, Put, CAS)
	Swapped bool   // CAS
}

// Config configures a Workload. Zero fields take the defaults listed.
type Config struct {
	// KV sends the requests. Required.
	KV *kvclient.Client
	// Clients run concurrently, each one request at a time. Default 4.
	Clients int
	// Keys is the size of the key set: Prefix:0 .. Prefix:Keys-1. Default 16.
	Keys int
	// Prefix of the keys; use a fresh one per run, since the checks assume
	// every key starts absent. Default "wl".
	Prefix string
	// KeySet, when set, is the key set instead of Prefix:0 .. Keys-1 (to
	// aim the load at chosen slots). Keys is then len(KeySet).
	KeySet []string
	// Rate bounds operations per second over all clients. Default 200.
	Rate float64
	// Reads and CASes are the shares of Get and CompareAndSet; the rest are
	// Puts. Defaults 0.5 and 0.2.
	Reads, CASes float64
	// OpTimeout bounds one call, redirects included. Default 5s.
	OpTimeout time.Duration
	// Seed makes the key and kind choices reproducible. Default 1.
	Seed uint64
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.KV == nil:
		return fmt.Errorf("%w: KV is required", ErrInvalid)
	case c.Clients < 0 || c.Keys < 0 || c.Rate < 0 || c.OpTimeout < 0:
		return fmt.Errorf("%w: Clients, Keys, Rate and OpTimeout must not be negative", ErrInvalid)
	case c.Reads < 0 || c.CASes < 0 || c.Reads+c.CASes > 1:
		return fmt.Errorf("%w: Reads %v and CASes %v must be shares summing to at most 1", ErrInvalid, c.Reads, c.CASes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Clients == 0 {
		c.Clients = 4
	}
	if len(c.KeySet) > 0 {
		c.Keys = len(c.KeySet)
	}
	if c.Keys == 0 {
		c.Keys = 16
	}
	if c.Prefix == "" {
		c.Prefix = "wl"
	}
	if c.Rate == 0 {
		c.Rate = 200
	}
	if c.Reads == 0 && c.CASes == 0 {
		c.Reads, c.CASes = 0.5, 0.2
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 5 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Workload runs the clients and records their history. Run it once.
type Workload struct {
	cfg   Config
	start time.Time

	mu  sync.Mutex // guards ops
	ops []Op
}

// New returns a workload; call Run.
func New(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Workload{cfg: cfg.withDefaults()}, nil
}

// Key returns the i-th key of the key set.
func (w *Workload) Key(i int) string {
	if len(w.cfg.KeySet) > 0 {
		return w.cfg.KeySet[i]
	}
	return fmt.Sprintf("%s:%d", w.cfg.Prefix, i)
}

// Keys returns the whole key set.
func (w *Workload) Keys() []string {
	out := make([]string, w.cfg.Keys)
	for i := range out {
		out[i] = w.Key(i)
	}
	return out
}

// Run runs the clients until ctx is done, then lets the calls in flight
// finish (each within OpTimeout) and returns. It returns nil: failures are
// in the history.
func (w *Workload) Run(ctx context.Context) error {
	w.start = time.Now()
	lim := rate.NewLimiter(rate.Limit(w.cfg.Rate), w.cfg.Clients)
	runClients(ctx, w.cfg.Clients, lim, func(id int) func(seq int) {
		return w.client(ctx, id, newRand(w.cfg.Seed, uint64(id)))
	})
	return nil
}

// client is one sequential client's step: one call at a time, as porcupine
// needs.
func (w *Workload) client(ctx context.Context, id int, rng *rand.Rand) func(seq int) {
	// seen is the last version this client saw per key, CAS's expectation,
	// so that some CASes succeed and some fail.
	seen := map[string]uint64{}
	return func(seq int) {
		key := w.Key(rng.IntN(w.cfg.Keys))
		op := Op{Client: id, Key: key}
		switch p := rng.Float64(); {
		case p < w.cfg.Reads:
			op.Kind = Get
		case p < w.cfg.Reads+w.cfg.CASes:
			op.Kind, op.Expected = CAS, seen[key]
			op.Value = fmt.Sprintf("c%d-%d", id, seq)
		default:
			op.Kind, op.Value = Put, fmt.Sprintf("c%d-%d", id, seq)
		}
		w.do(ctx, &op)
		if op.Err == "" {
			seen[key] = op.Version
		}
		w.record(op)
	}
}

// do runs op and fills in its times and results. Calls get their own
// deadline, not ctx: stopping the workload must not fail calls in flight.
func (w *Workload) do(ctx context.Context, op *Op) {
	kv := w.cfg.KV
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.OpTimeout)
	defer cancel()
	key := []byte(op.Key)
	var err error
	op.Call = w.now()
	switch op.Kind {
	case Get:
		var v []byte
		v, op.Version, op.Found, err = kv.Get(opCtx, key)
		op.Got = string(v)
	case Put:
		op.Version, err = kv.Put(opCtx, key, []byte(op.Value))
	case CAS:
		op.Swapped, op.Version, err = kv.CompareAndSet(opCtx, key, op.Expected, []byte(op.Value))
	}
	op.Return = w.now()
	if err != nil {
		op.Err = err.Error()
		// A redirect or fence on the last attempt means no store took the
		// request (Do returns any other answer at once, unretried).
		op.Refused = errors.Is(err, client.ErrTooManyRedirects) || errors.Is(err, client.ErrSlotFenced) || errors.Is(err, client.ErrNoMap)
		op.Unknown = op.Kind != Get && !op.Refused
	}
}

func (w *Workload) now() int64 { return int64(time.Since(w.start)) }

func (w *Workload) record(op Op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op)
}

// History returns the operations recorded so far, in completion order.
func (w *Workload) History() History {
	w.mu.Lock()
	defer w.mu.Unlock()
	return History{Ops: slices.Clone(w.ops), keys: w.Keys()}
}

// Final reads every key once, after the clients stopped, and records the
// reads in the history as one more client's, id Config.Clients, marked
// Final (so a linearizability check covers them too). It returns the
// updated history.
func (w *Workload) Final(ctx context.Context) (History, error) {
	var errs []error
	for _, k := range w.Keys() {
		op := Op{Client: w.cfg.Clients, Kind: Get, Key: k, Final: true}
		w.do(ctx, &op)
		if op.Err != "" {
			errs = append(errs, fmt.Errorf("workload: final read of %s: %s", k, op.Err))
		}
		w.record(op)
	}
	return w.History(), errors.Join(errs...)
}
