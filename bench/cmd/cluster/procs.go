package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs owns every process the benchmark starts, so one deferred stopAll
// stops them whatever happened.
type procs struct {
	mu   sync.Mutex
	list []*proc
	dir  string // logs
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (ps *procs) start(name string, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(ps.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after 10s, and waits.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopAll stops every process, newest first.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	l := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for i := len(l) - 1; i >= 0; i-- {
		l[i].stop()
	}
}

// freePorts returns n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// run runs a command to completion and returns its combined output.
func run(ctx context.Context, bin string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, tail(string(out), 800))
	}
	return string(out), nil
}

// runStdout runs a command to completion and returns its standard output
// alone (for output to parse); standard error goes into the error.
func runStdout(ctx context.Context, bin string, args ...string) (string, error) {
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, tail(stderr.String()+string(out), 800))
	}
	return string(out), nil
}

// timed runs a command and returns its wall time.
func timed(ctx context.Context, bin string, args ...string) (time.Duration, string, error) {
	t := time.Now()
	out, err := run(ctx, bin, args...)
	return time.Since(t), out, err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// poll calls f every interval until it returns nil or d passes.
func poll(ctx context.Context, d, interval time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop stopPolling
		if errors.As(err, &stop) {
			return stop.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready after %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// stopPolling ends a poll at once with its error.
type stopPolling struct{ error }
