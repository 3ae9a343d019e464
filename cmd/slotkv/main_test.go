package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/internal/syncbuf"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slotkv/kvpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var servingRE = regexp.MustCompile(`slotkv serving.*listen=(\S+) .*http=(\S+)`)

// startSlotkv runs the command with args and waits until it serves; it
// returns the gRPC and HTTP addresses and a stop function that returns the
// exit code.
func startSlotkv(t *testing.T, args ...string) (grpcAddr, httpAddr string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := new(syncbuf.Buffer)
	code := make(chan int, 1)
	go func() { code <- run(ctx, args, out) }()
	var once sync.Once
	var c int
	stop = func() int {
		once.Do(func() { cancel(); c = <-code })
		return c
	}
	t.Cleanup(func() { stop() })
	waitfor.Err(t, 20*time.Second, "slotkv serving", func() error {
		if m := servingRE.FindStringSubmatch(out.String()); m != nil {
			grpcAddr, httpAddr = m[1], m[2]
			return nil
		}
		select {
		case c := <-code:
			code <- c // for stop
			t.Fatalf("slotkv exited with %d: %s", c, out.String())
		default:
		}
		return fmt.Errorf("not serving yet: %s", out.String())
	})
	return grpcAddr, httpAddr, stop
}

// TestServeRestartKeepsData runs slotkv standalone, writes through its
// gRPC API, scrapes /metrics, restarts it on the same data dir and reads
// the key back.
func TestServeRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SLOTKV_ID", "kv-test") // flags come from the environment too
	args := []string{"--standalone", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", dir, "--fsync=false"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	addr, httpAddr, stop := startSlotkv(t, args...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	kv := kvpb.NewKVClient(conn)
	if _, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `slotd_node_writes_total{result="ok"} 1`) ||
		!strings.Contains(string(body), `slotd_slotkv_requests_total{code="OK",method="/slotkv.v1.KV/Put"} 1`) {
		t.Fatalf("/metrics lacks the write: %s", body)
	}
	conn.Close()
	if c := stop(); c != exitOK {
		t.Fatalf("exit %d", c)
	}

	addr, _, _ = startSlotkv(t, args...)
	conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := kvpb.NewKVClient(conn).Get(ctx, &kvpb.GetRequest{Key: []byte("k")})
	if err != nil || string(got.Value) != "v" || got.Version != 1 {
		t.Fatalf("after restart: %v %v", got, err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no id", []string{"--standalone"}},
		{"no slotd and not standalone", []string{"--id", "a", "--slotd", ""}},
		{"negative rate", []string{"--id", "a", "--standalone", "--export-rate", "-1"}},
		{"load report interval too short", []string{"--id", "a", "--standalone", "--load-report-interval", "100ms"}},
		{"load report interval too long", []string{"--id", "a", "--standalone", "--load-report-interval", "1h"}},
		{"unknown flag", []string{"--nope"}},
		{"wildcard listen without advertise", []string{"--id", "a", "--standalone", "--listen", "0.0.0.0:0", "--http", "", "--data-dir", "DIR"}},
		{"bad env", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args == nil {
				t.Setenv("SLOTKV_WEIGHT", "heavy")
				tc.args = []string{"--id", "a", "--standalone"}
			}
			for i, a := range tc.args {
				if a == "DIR" {
					tc.args[i] = t.TempDir()
				}
			}
			var out bytes.Buffer
			if c := run(context.Background(), tc.args, &out); c != exitUsage {
				t.Fatalf("exit %d for %v, want %d: %s", c, tc.args, exitUsage, out.String())
			}
		})
	}
}
