package harness

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/slotd/slotd/internal/syncbuf"
	"github.com/slotd/slotd/internal/waitfor"
)

// binaries are the commands built for every e2e run.
var binaries = []string{"slotd", "slotctl", "slotkv"}

var (
	binDir   string // where Main built the binaries
	buildErr error
)

// Main builds the binaries into a temporary directory, runs the tests and
// removes the directory. Use it from TestMain.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "slotd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	buildErr = build(dir)
	return m.Run()
}

// build compiles every binary of the module into dir.
func build(dir string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(root, "cmd", b)); err != nil {
			continue // not written yet; tests that need it fail in Start
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "./cmd/"+b)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", b, err, out)
		}
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("harness: not inside the slotd module")
	}
	return filepath.Dir(mod), nil
}

// Harness owns the processes of one test.
type Harness struct {
	t    testing.TB
	root string

	mu    sync.Mutex // guards procs and addrs
	procs []*Proc
	addrs map[string]string
}

// New returns a harness for t. Everything it starts is killed when t ends,
// and every process's output is logged if t failed.
func New(t testing.TB) *Harness {
	t.Helper()
	if binDir == "" {
		t.Fatal("harness: call harness.Main from TestMain")
	}
	if buildErr != nil {
		t.Fatalf("harness: %v", buildErr)
	}
	h := &Harness{t: t, root: t.TempDir(), addrs: map[string]string{}}
	t.Cleanup(h.cleanup)
	return h
}

// Bin returns the path of a built binary.
func (h *Harness) Bin(name string) string { return filepath.Join(binDir, name) }

// Dir returns a fresh directory for name (the same one on every call).
func (h *Harness) Dir(name string) string {
	d := filepath.Join(h.root, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		h.t.Fatal(err)
	}
	return d
}

// Addr returns a free 127.0.0.1:port for name, the same one on every call,
// so a restarted process comes back on its address. No two names get the
// same port: a port the kernel hands out again after its listener closed
// (it happened: an etcd member's client URL on another's peer port) is
// skipped.
func (h *Harness) Addr(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.addrs[name]; ok {
		return a
	}
	given := make(map[string]bool, len(h.addrs))
	for _, a := range h.addrs {
		given[a] = true
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.t.Fatalf("harness: free port: %v", err)
		}
		a := l.Addr().String()
		l.Close()
		if !given[a] {
			h.addrs[name] = a
			return a
		}
	}
	h.t.Fatalf("harness: no free port for %s that is not already given out", name)
	return ""
}

// Proc is one started process.
type Proc struct {
	Name string
	h    *Harness
	bin  string
	args []string
	env  []string

	mu   sync.Mutex // guards cmd, out, done
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

// Start runs binary bin (a name from Bin) with args; extra environment
// variables may be given as "K=V" in env.
func (h *Harness) Start(name, bin string, env []string, args ...string) *Proc {
	h.t.Helper()
	p := &Proc{Name: name, h: h, bin: h.Bin(bin), args: args, env: env, out: &syncbuf.Buffer{}}
	if err := p.start(); err != nil {
		h.t.Fatalf("harness: start %s: %v", name, err)
	}
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p
}

func (p *Proc) start() error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	fmt.Fprintf(p.out, "=== start %s %s\n", p.bin, strings.Join(p.args, " "))
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	// Own process group, so a kill reaches nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		fmt.Fprintf(p.out, "=== exit: %v\n", err)
		close(done)
	}()
	return nil
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	p.wait(30 * time.Second)
}

// Stop sends SIGTERM and waits up to 30s for a graceful exit, then kills.
// It returns the process's exit error (nil for a clean exit).
func (p *Proc) Stop() error {
	p.Signal(syscall.SIGTERM)
	if !p.wait(30 * time.Second) {
		p.Kill()
		return errors.New("did not stop within 30s of SIGTERM")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Restart starts the process again with the same binary and arguments. The
// previous instance must have exited.
func (p *Proc) Restart() {
	p.h.t.Helper()
	if p.Running() {
		p.h.t.Fatalf("harness: restart %s: still running", p.Name)
	}
	if err := p.start(); err != nil {
		p.h.t.Fatalf("harness: restart %s: %v", p.Name, err)
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Exited returns a channel closed when the current instance exits.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *Proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Exited():
		return true
	case <-t.C:
		return false
	}
}

// Output returns everything the process wrote so far, over all its runs.
func (p *Proc) Output() string { return p.out.String() }

// Run runs a short-lived binary (slotctl, slotkv load) to completion and
// returns its stdout, stderr and exit code.
func (h *Harness) Run(ctx context.Context, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	cmd := exec.CommandContext(ctx, h.Bin(bin), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			code = -1
			e.WriteString(err.Error())
		}
	}
	return o.String(), e.String(), code
}

// Eventually polls cond every interval until it returns nil or timeout
// passes, then fails the test with the last error. It never sleeps longer
// than needed, so a fast machine finishes fast and a slow one still passes.
func (h *Harness) Eventually(timeout time.Duration, what string, cond func() error) {
	h.t.Helper()
	waitfor.ErrEvery(h.t, timeout, 50*time.Millisecond, what, cond)
}

// cleanup kills every process (stop order: reverse of start, so clients go
// before servers and servers before etcd), then logs their output if the
// test failed.
func (h *Harness) cleanup() {
	h.mu.Lock()
	procs := h.procs
	h.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].Running() {
			procs[i].Kill()
		}
	}
	if h.t.Failed() {
		for _, p := range procs {
			h.t.Logf("----- output of %s -----\n%s", p.Name, p.Output())
		}
	}
}
