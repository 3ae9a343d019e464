package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// TestSlotdFrontDoor is what a new user meets: --version, one line saying
// slotd waits for `slotctl init` (not a retrying error), the Info service,
// and a clean stop with no error line and no stack trace from etcd.
func TestSlotdFrontDoor(t *testing.T) {
	var out, errb bytes.Buffer
	if c := runContext(context.Background(), []string{"--version"}, &out, &errb); c != exitOK || !strings.HasPrefix(out.String(), "slotd ") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", c, out.String(), errb.String())
	}

	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	p := start(t, serveArgs(t, grpcAddr, httpAddr, "--log-level", "info")...)
	eventually(t, "the line saying slotd waits for slotctl init", func() bool {
		return strings.Contains(p.log.String(), "waiting for slotctl init")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := slotdv1.NewInfoClient(dial(t, grpcAddr)).GetVersion(ctx, &slotdv1.GetVersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.GetVersion() == "" || v.GetGo() == "" || v.GetServerId() != "t1" || v.GetDirectorySchema() != directory.SchemaVersion {
		t.Errorf("GetVersion = %v", v)
	}
	if c := p.stop(t); c != exitOK {
		t.Fatalf("exit %d; log:\n%s", c, p.log)
	}
	log := p.log.String()
	if n := strings.Count(log, "slotctl init"); n != 1 {
		t.Errorf("%d lines name slotctl init, want 1:\n%s", n, log)
	}
	for _, bad := range []string{"not bootstrapped", "level=ERROR", "stacktrace", `{"level"`} {
		if strings.Contains(log, bad) {
			t.Errorf("log holds %q:\n%s", bad, log)
		}
	}
	if !strings.Contains(log, "slotd stopped") {
		t.Errorf("no clean stop in the log:\n%s", log)
	}
}
