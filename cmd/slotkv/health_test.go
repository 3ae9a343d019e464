package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
)

// startSlotd serves slotd in-process over a real etcd (server/servertest),
// without a mover, and returns its address.
func startSlotd(t *testing.T) string {
	t.Helper()
	return servertest.Start(t, func(c *server.Config) { c.DisableMover = true }).Addr()
}

// TestHealthReflectionReadyz runs slotkv against a slotd that is not yet
// initialized: gRPC health says NOT_SERVING and /readyz 503 until the
// directory is bootstrapped with the node, then SERVING and 200; the
// reflection service lists the KV API.
func TestHealthReflectionReadyz(t *testing.T) {
	slotd := startSlotd(t)
	addr, httpAddr, _ := startSlotkv(t, "--id", "n1", "--slotd", slotd, "--listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--data-dir", t.TempDir(), "--fsync=false")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return r.GetStatus()
	}
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health before init = %v, want NOT_SERVING", st)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "slotctl init") {
		t.Fatalf("/readyz before init = %d %q, want 503 naming slotctl init", code, body)
	}

	sc, err := grpc.NewClient(slotd, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if _, err := slotdv1.NewAdminClient(sc).Bootstrap(ctx, &slotdv1.BootstrapRequest{
		Nodes: []*slotdv1.Node{{Id: "n1", Address: addr, Weight: 1}}, Operator: "test"}); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 30*time.Second, "health SERVING after init", func() bool {
		return health() == healthpb.HealthCheckResponse_SERVING
	})
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz after init = %d %q", code, body)
	}

	rc, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "slotkv.v1.KV") || !strings.Contains(got, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %q", got)
	}
}

// TestVersionFlag: --version prints the build on stdout and starts nothing.
func TestVersionFlag(t *testing.T) {
	var out, errb strings.Builder
	versionOut = &out
	t.Cleanup(func() { versionOut = os.Stdout })
	if c := run(context.Background(), []string{"--version"}, &errb); c != exitOK {
		t.Fatalf("exit %d: %s", c, errb.String())
	}
	if !strings.HasPrefix(out.String(), "slotkv ") || errb.Len() != 0 {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}
}
