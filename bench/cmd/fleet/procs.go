package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is a process the simulation started (etcd or slotd), stopped by
// stop: SIGTERM, then SIGKILL after ten seconds.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// startChild starts bin with args, its output in dir/name.log.
func startChild(dir, name, bin string, args ...string) (*child, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.done) }()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// exited reports an error when the process has ended.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited (%v); see its log", c.name, c.cmd.ProcessState)
	default:
		return nil
	}
}

// ports returns n free ports on 127.0.0.1 (free when asked: another
// process may take one before it is used, which fails the start loudly).
func ports(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// waitHTTP polls url until it answers 200, the process ends, or d passes.
func waitHTTP(ctx context.Context, c *child, url string, d time.Duration) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		if e := c.exited(); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %w", c.name, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// usage is a process's CPU time and resident memory, read from /proc.
type usage struct {
	cpu time.Duration
	rss int64
}

// clockTicks is the kernel's USER_HZ, which /proc/PID/stat counts in; 100
// on every Linux this runs on.
const clockTicks = 100

// procUsage reads pid's CPU time (user + system) and resident set size.
func procUsage(pid int) (usage, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return usage{}, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	// The command name may hold spaces; the fields after it do not.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return usage{}, fmt.Errorf("cpu of pid %d: unreadable /proc stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return usage{}, fmt.Errorf("cpu of pid %d: short /proc stat", pid)
	}
	// f[0] is the state (field 3): utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return usage{}, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	u := usage{cpu: time.Duration(ut+st) * time.Second / clockTicks}
	sf, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return usage{}, fmt.Errorf("memory of pid %d: %w", pid, err)
	}
	defer sf.Close()
	sc := bufio.NewScanner(sf)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return usage{}, fmt.Errorf("memory of pid %d: %w", pid, err)
			}
			u.rss = kb << 10
		}
	}
	return u, sc.Err()
}
