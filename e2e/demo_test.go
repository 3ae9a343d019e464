package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemoPort: DEMO_PORT moves every port of make demo (slotd, its etcd,
// each node's gRPC and HTTP), and the script names no fixed port besides
// the default base.
func TestDemoPort(t *testing.T) {
	script := filepath.Join("..", "scripts", "demo.sh")
	ports := func(base string) (string, error) {
		cmd := exec.Command("bash", script, "ports")
		cmd.Env = append(os.Environ(), "DEMO_PORT="+base)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := ports("9400")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"slotd=127.0.0.1:9400 ", "http=127.0.0.1:9401 ", "etcd=127.0.0.1:9479 ", "etcd-peer=127.0.0.1:9480",
		"n1=127.0.0.1:9501 http=127.0.0.1:9511", "n4=127.0.0.1:9504 http=127.0.0.1:9514"} {
		if !strings.Contains(out, want) {
			t.Errorf("DEMO_PORT=9400 ports lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ":74") || strings.Contains(out, ":75") {
		t.Errorf("a default port is left:\n%s", out)
	}
	if out, err := ports("nope"); err == nil || !strings.Contains(out, "DEMO_PORT") {
		t.Errorf("DEMO_PORT=nope: %v %s", err, out)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(src), "\n") {
		if regexp.MustCompile(`\b7[45]\d\d\b`).MatchString(line) && !strings.Contains(line, "DEMO_PORT") {
			t.Errorf("scripts/demo.sh:%d names a fixed port: %s", i+1, line)
		}
	}
}
