package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slotkv/workload"
	"github.com/slotd/slotd/tlsconf"
)

// clientOptions are the flags every client command shares.
type clientOptions struct {
	slotd   string
	timeout time.Duration
	output  string
	// TLS to slotd and to the nodes: CA, and a certificate for mutual TLS.
	tlsCA, tlsCert, tlsKey string
}

func (o *clientOptions) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.slotd, "slotd", "127.0.0.1:7400", "slotd gRPC addresses, comma-separated (the SDK reads the map from any)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "deadline of each request, redirects included")
	f.StringVarP(&o.output, "output", "o", "text", "summary format: text or json")
	f.StringVar(&o.tlsCA, "tls-ca", "", "CA (PEM) that verifies slotd and the nodes; enables TLS")
	f.StringVar(&o.tlsCert, "tls-cert", "", "client certificate (PEM) for mutual TLS (a role slotd and the nodes accept, e.g. read)")
	f.StringVar(&o.tlsKey, "tls-key", "", "private key (PEM) for --tls-cert")
}

// usageArgs marks an argument-count error as a usage error (exit 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// connect returns a KV client routed by the SDK, after the first map arrived.
func (o *clientOptions) connect(ctx context.Context) (*kvclient.Client, func(), error) {
	if o.output != "text" && o.output != "json" {
		return nil, nil, usageError{fmt.Errorf("unknown output %q; use -o text or -o json", o.output)}
	}
	var eps []string
	for e := range strings.SplitSeq(o.slotd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	var dial []grpc.DialOption
	if o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" {
		if (o.tlsCert == "") != (o.tlsKey == "") {
			return nil, nil, usageError{errors.New("--tls-cert and --tls-key go together")}
		}
		tc, err := tlsconf.NewClient(tlsconf.Config{CAFile: o.tlsCA, CertFile: o.tlsCert, KeyFile: o.tlsKey})
		if err != nil {
			return nil, nil, fmt.Errorf("TLS files: %w", err)
		}
		dial = append(dial, grpc.WithTransportCredentials(tc.Credentials()))
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sdk, err := client.New(wait, client.Options{Endpoints: eps, MaxAttempts: 10, DialOptions: dial})
	if err != nil {
		return nil, nil, fmt.Errorf("slot map from %s (is slotd running and bootstrapped?): %w", o.slotd, err)
	}
	kv := kvclient.New(sdk, dial...)
	return kv, func() { kv.Close(); sdk.Close() }, nil
}

// clientCommands are slotkv's client subcommands: they reach the store
// through slotd's SDK, as an application would.
func clientCommands() []*cobra.Command { return clientCommandsTo(os.Stdout) }

func clientCommandsTo(stdout io.Writer) []*cobra.Command {
	return []*cobra.Command{newPutCmd(stdout), newGetCmd(stdout), newLoadCmd(stdout), newCheckCmd(stdout), newTrafficCmd(stdout)}
}

func newPutCmd(stdout io.Writer) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "store one value through the SDK and print the key's new version",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.request(cmd.Context(), func(ctx context.Context, kv *kvclient.Client) error {
				v, err := kv.Put(ctx, []byte(args[0]), []byte(args[1]))
				if err != nil {
					return fmt.Errorf("put %q: %w", args[0], err)
				}
				return o.print(stdout, map[string]any{"key": args[0], "version": v}, fmt.Sprintf("version %d\n", v))
			})
		},
	}
	o.bind(cmd)
	return cmd
}

func newGetCmd(stdout io.Writer) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "print one key's value through the SDK (exit 1 if it does not exist)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.request(cmd.Context(), func(ctx context.Context, kv *kvclient.Client) error {
				val, ver, found, err := kv.Get(ctx, []byte(args[0]))
				if err != nil {
					return fmt.Errorf("get %q: %w", args[0], err)
				}
				if !found {
					return fmt.Errorf("key %q not found", args[0])
				}
				return o.print(stdout, map[string]any{"key": args[0], "value": string(val), "version": ver}, string(val)+"\n")
			})
		},
	}
	o.bind(cmd)
	return cmd
}

// request connects, runs one request under --timeout and closes the
// client: the body of put and get.
func (o *clientOptions) request(ctx context.Context, do func(ctx context.Context, kv *kvclient.Client) error) error {
	kv, closeKV, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer closeKV()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return do(ctx, kv)
}

func (o *clientOptions) print(w io.Writer, v any, text string) error {
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := io.WriteString(w, text)
	return err
}

// bulkOptions are the flags of load and check.
type bulkOptions struct {
	clientOptions
	keys, size, concurrency int
	prefix                  string
}

func (o *bulkOptions) bind(cmd *cobra.Command, concurrency int) {
	o.clientOptions.bind(cmd)
	f := cmd.Flags()
	f.IntVar(&o.keys, "keys", 100_000, "number of keys: PREFIX:0 .. PREFIX:N-1")
	f.IntVar(&o.size, "size", 100, "value size in bytes")
	f.IntVar(&o.concurrency, "concurrency", concurrency, "requests in flight")
	f.StringVar(&o.prefix, "prefix", "key", "key prefix")
}

func (o *bulkOptions) validate() error {
	if o.keys < 0 || o.size < 1 || o.concurrency < 1 {
		return usageError{errors.New("--keys must be >= 0, --size and --concurrency >= 1")}
	}
	if o.timeout <= 0 {
		// Every request would fail at once (the workload refuses it).
		return usageError{errors.New("--timeout must be positive")}
	}
	return nil
}

// config maps the flags onto the workload's key set.
func (o *bulkOptions) config(kv *kvclient.Client) workload.BulkConfig {
	return workload.BulkConfig{KV: kv, Prefix: o.prefix, Keys: o.keys, Size: o.size, Concurrency: o.concurrency, OpTimeout: o.timeout}
}

// Summary is what load, check and traffic print (-o json emits it as is).
type Summary struct {
	Command   string  `json:"command"`
	Ops       int64   `json:"ops"`
	Reads     int64   `json:"reads"`
	Writes    int64   `json:"writes"`
	Errors    int64   `json:"errors"`
	Bad       int64   `json:"bad"` // check: missing or wrong; traffic: reads of a wrong value, lost writes
	Redirects int64   `json:"redirects"`
	Fenced    int64   `json:"fenced"`
	Seconds   float64 `json:"seconds"`
	// Examples lists the first few failures.
	Examples []string `json:"examples,omitempty"`
}

func (s *Summary) write(w io.Writer, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	rate := 0.0
	if s.Seconds > 0 {
		rate = float64(s.Ops) / s.Seconds
	}
	fmt.Fprintf(w, "%s: %d ops (%d reads, %d writes) in %.1fs, %.0f ops/s; errors %d, bad %d, redirects followed %d, fenced waits %d\n",
		s.Command, s.Ops, s.Reads, s.Writes, s.Seconds, rate, s.Errors, s.Bad, s.Redirects, s.Fenced)
	for _, e := range s.Examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	return nil
}

func newLoadCmd(stdout io.Writer) *cobra.Command {
	return newBulkCmd(stdout, "load", "write --keys keys of --size bytes with deterministic values through the SDK",
		workload.Load, func(s *Summary, keys int) error {
			if s.Errors > 0 {
				return fmt.Errorf("load: %d of %d writes failed", s.Errors, keys)
			}
			return nil
		})
}

func newCheckCmd(stdout io.Writer) *cobra.Command {
	return newBulkCmd(stdout, "check", "read every key `load` wrote and verify its value (exit 1 on any missing or wrong key)",
		workload.Check, func(s *Summary, _ int) error {
			if s.Errors > 0 || s.Bad > 0 {
				return fmt.Errorf("check: %d keys missing or wrong, %d reads failed", s.Bad, s.Errors)
			}
			return nil
		})
}

// newBulkCmd builds load or check: run goes over the whole key set once,
// and failed says whether its summary fails the command (given the number
// of keys). Interrupted, the command fails whatever the summary says.
func newBulkCmd(stdout io.Writer, use, short string, run func(context.Context, workload.BulkConfig) (workload.Result, error), failed func(s *Summary, keys int) error) *cobra.Command {
	var o bulkOptions
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := runWorkload(ctx, &o, stdout, use, func(kv *kvclient.Client) (workload.Result, error) {
				return run(ctx, o.config(kv))
			})
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%s interrupted: %w", use, err)
			}
			return failed(s, o.keys)
		},
	}
	o.bind(cmd, 16)
	return cmd
}

// runWorkload is the one body of load, check and traffic: it connects
// through the SDK, runs one workload on the client, prints the summary of
// its result and returns it. The commands differ in the workload and in
// what in the summary fails them.
func runWorkload(ctx context.Context, o *bulkOptions, stdout io.Writer, command string, run func(kv *kvclient.Client) (workload.Result, error)) (*Summary, error) {
	kv, closeKV, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer closeKV()
	r, err := run(kv)
	if err != nil {
		return nil, err
	}
	s := &Summary{
		Command: command, Ops: r.Reads + r.Writes, Reads: r.Reads, Writes: r.Writes, Errors: r.Errors, Bad: r.Bad,
		Redirects: kv.Redirects(), Fenced: kv.Fenced(), Seconds: r.Elapsed.Seconds(), Examples: r.Examples,
	}
	if err := s.write(stdout, o.output); err != nil {
		return nil, err
	}
	return s, nil
}

// trafficOptions are the flags of traffic.
type trafficOptions struct {
	bulkOptions
	duration   time.Duration
	rate       float64
	writeKeys  int
	readsShare float64
}

func newTrafficCmd(stdout io.Writer) *cobra.Command {
	var o trafficOptions
	cmd := &cobra.Command{
		Use:   "traffic",
		Short: "read loaded keys and write traffic keys through the SDK until --duration or SIGTERM, then verify every write",
		Long: `traffic runs a steady mix of reads of the keys 'load' wrote (each read is
verified) and writes to its own keys (TRAFFIC-PREFIX:worker:j, one writer per
key, so the last acknowledged value of each is known). It stops after
--duration (0: at SIGINT or SIGTERM), reads every key it wrote back, and
prints operations, errors, wrong reads plus lost writes ("bad") and the
redirects it followed. Exit 1 if any of errors or bad is not zero.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if o.rate <= 0 || o.writeKeys < 1 || o.readsShare < 0 || o.readsShare > 1 {
				return usageError{errors.New("--rate must be > 0, --write-keys >= 1, --reads between 0 and 1")}
			}
			return runTraffic(cmd.Context(), &o, stdout)
		},
	}
	o.bind(cmd, 4)
	f := cmd.Flags()
	f.DurationVar(&o.duration, "duration", 0, "how long to run; 0 runs until SIGINT or SIGTERM")
	f.Float64Var(&o.rate, "rate", 500, "operations per second, all workers together")
	f.IntVar(&o.writeKeys, "write-keys", 256, "keys each worker writes")
	f.Float64Var(&o.readsShare, "reads", 0.5, "share of reads in the mix")
	return cmd
}

func runTraffic(ctx context.Context, o *trafficOptions, stdout io.Writer) error {
	s, err := runWorkload(ctx, &o.bulkOptions, stdout, "traffic", func(kv *kvclient.Client) (workload.Result, error) {
		run := ctx
		if o.duration > 0 {
			var cancel context.CancelFunc
			run, cancel = context.WithTimeout(ctx, o.duration)
			defer cancel()
		}
		return workload.Traffic(run, workload.TrafficConfig{BulkConfig: o.config(kv), Rate: o.rate, WriteKeys: o.writeKeys, Reads: o.readsShare})
	})
	if err != nil {
		return err
	}
	if s.Errors > 0 || s.Bad > 0 {
		return fmt.Errorf("traffic: %d errors, %d wrong reads or lost writes", s.Errors, s.Bad)
	}
	return nil
}
