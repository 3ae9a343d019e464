package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/internal/buildinfo"
)

// Exit codes scripts can rely on.
const (
	exitOK      = 0
	exitFailure = 1 // the command failed: server unreachable, I/O, a move failed
	exitUsage   = 2 // bad flags or arguments: nothing was sent
	exitRefused = 3 // refused: the cluster changed or a precondition failed; nothing changed
)

// usageError marks an error in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// refusedError marks a request the cluster refused without changing anything.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }
func (e refusedError) Unwrap() error { return e.err }

// globals are the flags every command shares, and the process's
// surroundings, injected so tests capture them.
type globals struct {
	endpoints string
	timeout   time.Duration
	output    string
	operator  string
	reason    string
	tlsCA     string
	tlsCert   string
	tlsKey    string
	tokenFile string
	// context is --context; contextName the context in use ("" for none).
	context     string
	contextName string
	stdin       io.Reader
	stdout      io.Writer
	stderr      io.Writer
	// tty reports whether stdout is a terminal (progress bar).
	tty func() bool
	// interactive reports whether a question can be asked: stdin and
	// stdout are both terminals.
	interactive func() bool
	// poll is how often a wait asks slotd for progress.
	poll time.Duration
}

// canAsk reports whether a question can be put to the operator.
func (g *globals) canAsk() bool { return g.interactive != nil && g.interactive() }

// parseEndpoints splits --endpoints into host:port items; scheme is
// "https" or "http" when they were given as URLs, "" for host:port. Mixing
// http:// and https:// is refused.
func (g *globals) parseEndpoints(s string) (eps []string, scheme string, err error) {
	schemes := map[string]bool{}
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		hp, sc, err := splitEndpoint(e)
		if err != nil {
			return nil, "", err
		}
		if sc != "" {
			schemes[sc] = true
			scheme = sc
		}
		eps = append(eps, hp)
	}
	if len(schemes) > 1 {
		return nil, "", usagef("--endpoints %q mixes http:// and https://", s)
	}
	return eps, scheme, nil
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "slotctl",
		Short: "Operate a slotd cluster: slot map, nodes, planned rebalances",
		Long: `slotctl drives a slotd cluster. Every change is planned and shown before it is
applied, moves slots under a per-donor throttle (each donor copying one slot
holding data at a time), and can be paused, cancelled or rolled back.

Exit codes: 0 success, 1 failure, 2 usage error, 3 refused (the cluster changed
or a precondition failed; nothing changed).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().String(),
	}
	root.SetVersionTemplate("slotctl {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "endpoints", envDefault("SLOTCTL_ENDPOINTS", "127.0.0.1:7400"), "slotd gRPC endpoints, comma-separated host:port, http://host:port or https://host:port (https: TLS) (env SLOTCTL_ENDPOINTS)")
	pf.StringVar(&g.context, "context", "", "the config file's context to use (env SLOTCTL_CONTEXT; default its current context; see slotctl config)")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "timeout of each request to slotd")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.StringVar(&g.operator, "operator", defaultOperator(), "name recorded in history for changes (ignored when slotd authenticates callers)")
	pf.StringVar(&g.reason, "reason", "", "why: recorded in the audit log with the change (slotctl history)")
	pf.StringVar(&g.tlsCA, "tls-ca", os.Getenv("SLOTCTL_TLS_CA"), "CA (PEM) that verifies slotd's certificate; enables TLS (env SLOTCTL_TLS_CA)")
	pf.StringVar(&g.tlsCert, "tls-cert", os.Getenv("SLOTCTL_TLS_CERT"), "client certificate (PEM) with an admin role; enables TLS (env SLOTCTL_TLS_CERT)")
	pf.StringVar(&g.tlsKey, "tls-key", os.Getenv("SLOTCTL_TLS_KEY"), "private key (PEM) for --tls-cert (env SLOTCTL_TLS_KEY)")
	pf.StringVar(&g.tokenFile, "token-file", os.Getenv("SLOTCTL_TOKEN_FILE"), "file holding a bearer token with an admin role; needs TLS (env SLOTCTL_TOKEN_FILE)")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if g.output != "table" && g.output != "json" {
			return usagef("unknown output format %q; use -o table or -o json", g.output)
		}
		if g.timeout <= 0 {
			return usagef("--timeout must be positive, e.g. --timeout 10s")
		}
		if isConfigCommand(cmd) {
			return nil
		}
		return g.applyContext(cmd)
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	for _, add := range commands {
		root.AddCommand(add(g))
	}
	addCompletions(root, g)
	return root
}

// commands is filled by each command's file in init, so adding a command
// touches only its own file.
var commands []func(*globals) *cobra.Command

func register(f func(*globals) *cobra.Command) { commands = append(commands, f) }

// run executes the command line and returns the process exit code. Errors
// are one line on stderr.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr, poll: 300 * time.Millisecond,
		tty:         func() bool { return isTerminal(stdout) },
		interactive: func() bool { return isTerminal(stdin) && isTerminal(stdout) }}
	return runWith(g, args)
}

// runWith is run with the surroundings already set (tests set tty and poll).
func runWith(g *globals, args []string) int {
	root := newRootCmd(g)
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	err = fromRPC(err, g)
	fmt.Fprintf(g.stderr, "slotctl: %s\n", oneLine(err.Error()))
	return exitCode(err)
}

// defaultOperator names the person at the keyboard for history.
func defaultOperator() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "slotctl"
}

// isTerminal reports whether f (a reader or writer) is a character device
// (a terminal), without a dependency on x/term: progress bars and prompts
// only make sense there.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func exitCode(err error) int {
	var ue usageError
	var re refusedError
	switch {
	case errors.As(err, &ue), isCobraUsage(err):
		return exitUsage
	case errors.As(err, &re):
		return exitRefused
	default:
		return exitFailure
	}
}

// isCobraUsage recognizes cobra's own argument errors, which are plain.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "accepts ") ||
		strings.HasPrefix(msg, "requires at least") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.HasPrefix(msg, "invalid argument") ||
		strings.HasPrefix(msg, "if any flags in the group")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
