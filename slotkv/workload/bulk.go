package workload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/slotd/slotd/slotkv/kvclient"
)

// The mixes of the `slotkv` client commands: Load writes a key set with
// values derived from each key, Check reads it back, Traffic reads it and
// writes keys of its own until stopped, then verifies every write. Unlike
// Workload they keep counts, not a history, so they can run for hours.

// BulkConfig is the key set of Load and Check (and what Traffic reads).
type BulkConfig struct {
	// KV sends the requests. Required.
	KV *kvclient.Client
	// Prefix and Keys name the key set: Prefix:0 .. Prefix:Keys-1.
	Prefix string
	Keys   int
	// Size is each value's length in bytes (values are LoadValue's).
	Size int
	// Concurrency is the requests in flight (Traffic: its clients).
	Concurrency int
	// OpTimeout bounds each request, redirects included.
	OpTimeout time.Duration
}

// Validate reports the first invalid field.
func (c BulkConfig) Validate() error {
	switch {
	case c.KV == nil:
		return fmt.Errorf("%w: KV is required", ErrInvalid)
	case c.Keys < 0 || c.Size < 1 || c.Concurrency < 1:
		return fmt.Errorf("%w: Keys must be >= 0, Size and Concurrency >= 1", ErrInvalid)
	case c.OpTimeout <= 0:
		return fmt.Errorf("%w: OpTimeout must be positive", ErrInvalid)
	}
	return nil
}

// Result counts what a mix did.
type Result struct {
	Reads, Writes int64
	// Errors counts failed requests; Bad counts keys missing or wrong
	// (Check), reads of a wrong value and lost writes (Traffic).
	Errors, Bad int64
	Elapsed     time.Duration
	// Examples lists the first few failures.
	Examples []string
}

// LoadKey is the i-th key of a load with prefix.
func LoadKey(prefix string, i int) []byte { return []byte(prefix + ":" + strconv.Itoa(i)) }

// LoadValue is the deterministic value of a loaded key: SHA-256 blocks of
// the key and a counter, cut to size, so Check can verify any key without
// remembering what Load wrote.
func LoadValue(key []byte, size int) []byte {
	out := make([]byte, 0, size+sha256.Size)
	var ctr [8]byte
	for n := uint64(0); len(out) < size; n++ {
		h := sha256.New()
		h.Write(key)
		binary.BigEndian.PutUint64(ctr[:], n)
		h.Write(ctr[:])
		out = h.Sum(out)
	}
	return out[:size]
}

// Load writes every key of the set with its LoadValue, Concurrency at a
// time, until done or ctx ends.
func Load(ctx context.Context, c BulkConfig) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	var ex examples
	var errs atomic.Int64
	start := time.Now()
	forEachKey(ctx, c.Keys, c.Concurrency, func(i int) {
		key := LoadKey(c.Prefix, i)
		opCtx, cancel := context.WithTimeout(ctx, c.OpTimeout)
		defer cancel()
		if _, err := c.KV.Put(opCtx, key, LoadValue(key, c.Size)); err != nil {
			errs.Add(1)
			ex.add("%s: %v", key, err)
		}
	})
	return Result{Writes: int64(c.Keys), Errors: errs.Load(), Elapsed: time.Since(start), Examples: ex.get()}, nil
}

// Check reads every key of the set and verifies its value, Concurrency at
// a time, until done or ctx ends.
func Check(ctx context.Context, c BulkConfig) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	var ex examples
	var errs, bad atomic.Int64
	start := time.Now()
	forEachKey(ctx, c.Keys, c.Concurrency, func(i int) {
		key := LoadKey(c.Prefix, i)
		opCtx, cancel := context.WithTimeout(ctx, c.OpTimeout)
		defer cancel()
		val, _, found, err := c.KV.Get(opCtx, key)
		switch {
		case err != nil:
			errs.Add(1)
			ex.add("%s: %v", key, err)
		case !found:
			bad.Add(1)
			ex.add("%s: missing", key)
		case !bytes.Equal(val, LoadValue(key, c.Size)):
			bad.Add(1)
			ex.add("%s: wrong value (%d bytes)", key, len(val))
		}
	})
	return Result{Reads: int64(c.Keys), Errors: errs.Load(), Bad: bad.Load(), Elapsed: time.Since(start), Examples: ex.get()}, nil
}

// TrafficConfig is Traffic's mix: reads of the loaded key set and writes to
// keys of its own.
type TrafficConfig struct {
	BulkConfig
	// Rate bounds operations per second over all clients.
	Rate float64
	// WriteKeys is how many keys each client writes:
	// Prefix-traffic:client:j, one writer per key, so the last acknowledged
	// value of each is known.
	WriteKeys int
	// Reads is the share of reads in the mix (none when Keys is 0).
	Reads float64
}

// Validate reports the first invalid field.
func (c TrafficConfig) Validate() error {
	if err := c.BulkConfig.Validate(); err != nil {
		return err
	}
	if c.Rate <= 0 || c.WriteKeys < 1 || c.Reads < 0 || c.Reads > 1 {
		return fmt.Errorf("%w: Rate must be > 0, WriteKeys >= 1, Reads between 0 and 1", ErrInvalid)
	}
	return nil
}

// Traffic runs Concurrency clients until ctx ends, each read verified
// against LoadValue, then reads every key it wrote back: an acknowledged
// write that does not read back is a lost write (Bad). Requests get their
// own deadline, not ctx's: stopping lets the requests in flight finish
// instead of failing them.
func Traffic(ctx context.Context, c TrafficConfig) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	kv := c.KV
	lim := rate.NewLimiter(rate.Limit(c.Rate), c.Concurrency)
	var reads, writes, errs, bad atomic.Int64
	var ex examples
	// last[w][j] is the last value client w had acknowledged for its key j.
	last := make([][][]byte, c.Concurrency)
	start := time.Now()
	writeKey := func(w, j int) []byte { return []byte(fmt.Sprintf("%s-traffic:%d:%d", c.Prefix, w, j)) }
	runClients(ctx, c.Concurrency, lim, func(w int) func(seq int) {
		last[w] = make([][]byte, c.WriteKeys)
		rng := newRand(uint64(w), uint64(start.UnixNano()))
		return func(seq int) {
			opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.OpTimeout)
			defer cancel()
			if c.Keys > 0 && rng.Float64() < c.Reads {
				key := LoadKey(c.Prefix, rng.IntN(c.Keys))
				val, _, found, err := kv.Get(opCtx, key)
				reads.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
					ex.add("get %s: %v", key, err)
				case !found || !bytes.Equal(val, LoadValue(key, c.Size)):
					bad.Add(1)
					ex.add("get %s: missing or wrong value", key)
				}
				return
			}
			j := rng.IntN(c.WriteKeys)
			key := writeKey(w, j)
			val := []byte(fmt.Sprintf("w%d-seq%d", w, seq))
			_, err := kv.Put(opCtx, key, val)
			writes.Add(1)
			if err != nil {
				errs.Add(1)
				ex.add("put %s: %v", key, err)
				// Unknown outcome: either value may be there now.
				last[w][j] = nil
			} else {
				last[w][j] = val
			}
		}
	})
	elapsed := time.Since(start)

	// Every acknowledged write must read back (unless a later write failed
	// with an unknown outcome, which cleared it above).
	for w := range last {
		for j, want := range last[w] {
			if want == nil {
				continue
			}
			key := writeKey(w, j)
			opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.OpTimeout)
			got, _, _, err := kv.Get(opCtx, key)
			cancel()
			if err != nil {
				errs.Add(1)
				ex.add("verify %s: %v", key, err)
			} else if !bytes.Equal(got, want) {
				bad.Add(1)
				ex.add("lost write %s: want %q, read %q", key, want, got)
			}
		}
	}
	return Result{Reads: reads.Load(), Writes: writes.Load(), Errors: errs.Load(), Bad: bad.Load(), Elapsed: elapsed, Examples: ex.get()}, nil
}
