package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/waitfor"
)

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, sc.Err()
}

// BenchmarkRSS1000Watchers builds slotd, runs it (embedded etcd included)
// as its own process, bootstraps three nodes and reports its RSS idle and
// with 1,000 SDK clients watching the map from this process. Run with
// -benchtime=1x.
func BenchmarkRSS1000Watchers(b *testing.B) {
	const watchers = 1000
	bin := filepath.Join(b.TempDir(), "slotd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for b.Loop() {
		grpcAddr, httpAddr := freeAddr(b), freeAddr(b)
		cmd := exec.Command(bin, "--data-dir", b.TempDir(), "--listen", grpcAddr, "--http", httpAddr,
			"--etcd-client-url", freeAddr(b), "--etcd-peer-url", freeAddr(b), "--log-level", "warn")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stop := func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
		b.Cleanup(stop) // after a failure too (a second stop does nothing)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		conn := dial(b, grpcAddr)
		ac := slotdv1.NewAdminClient(conn)
		waitfor.ErrEvery(b, 2*time.Minute, 50*time.Millisecond, "bootstrap", func() error {
			_, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: []*slotdv1.Node{
				{Id: "a", Address: "127.0.0.1:7001"}, {Id: "b", Address: "127.0.0.1:7002"}, {Id: "c", Address: "127.0.0.1:7003"},
			}})
			return err
		})
		idle, err := rssBytes(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		cs := make([]*client.Client, watchers)
		for i := range cs {
			if cs[i], err = client.New(ctx, client.Options{Endpoints: []string{grpcAddr}}); err != nil {
				b.Fatal(err)
			}
		}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		waitfor.ErrEvery(b, 2*time.Minute, 50*time.Millisecond, "the server counting 1,000 watch streams", func() error {
			if _, body := httpGet(hc, "http://"+httpAddr+"/metrics"); !strings.Contains(body, "\nslotd_service_watchers 1000\n") {
				return errors.New("slotd_service_watchers is not 1000 yet")
			}
			return nil
		})
		busy, err := rssBytes(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(idle)/(1<<20), "idle-RSS-MiB")
		b.ReportMetric(float64(busy)/(1<<20), "1000-watchers-RSS-MiB")
		b.ReportMetric(float64(busy-idle)/watchers/1024, "KiB/watcher")
		for _, c := range cs {
			c.Close()
		}
		conn.Close()
		cancel()
		stop()
	}
}
