package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/buildinfo"
)

const envPrefix = "SLOTD_"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // could not start, or failed while running
	exitUsage   = 2 // bad flags
	// exitSchema: etcd holds a directory schema newer than this binary
	// knows; upgrade slotd (running it would corrupt the directory).
	exitSchema = 3
)

type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext runs slotd until ctx ends (SIGTERM or SIGINT in main).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newServeCmd(stderr)
	root.Version = buildinfo.Read().String()
	root.SetVersionTemplate("slotd {{.Version}}\n")
	root.AddCommand(newEtcdCmd(stderr))
	root.AddCommand(newRestoreCmd(stdout, stderr))
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(usageError)), strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "slotd: %v\n", err)
		return exitUsage
	case errors.Is(err, directory.ErrSchemaTooNew):
		fmt.Fprintf(stderr, "slotd: %v\n", err)
		return exitSchema
	default:
		fmt.Fprintf(stderr, "slotd: %v\n", err)
		return exitFailure
	}
}

// newLogger returns a text logger at level ("debug", "info", "warn", "error").
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", level)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func silence(cmd *cobra.Command) {
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
}
