package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// No test reads the config file of the person running them; tests of
	// contexts set their own.
	os.Setenv("SLOTCTL_CONFIG", filepath.Join(os.TempDir(), "slotctl-test-no-config", "config.json"))
	for _, v := range []string{"SLOTCTL_CONTEXT", "SLOTCTL_ENDPOINTS", "SLOTCTL_TLS_CA", "SLOTCTL_TLS_CERT", "SLOTCTL_TLS_KEY", "SLOTCTL_TOKEN_FILE"} {
		os.Unsetenv(v)
	}
	goleak.VerifyTestMain(m)
}

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata/")

// runCLI runs slotctl in-process and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// golden compares got with testdata/name, or rewrites it with -rewrite.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (run with -rewrite if intended)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestHashGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"hash_table.golden", []string{"hash", "user:42", "{user:42}:cart", "foo"}},
		{"hash_json.golden", []string{"hash", "-o", "json", "user:42", "{user:42}:cart", "foo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, tc.name, out)
		})
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no key", []string{"hash"}, exitUsage, "requires at least 1 arg"},
		{"bad output", []string{"hash", "-o", "yaml", "k"}, exitUsage, `unknown output format "yaml"`},
		{"unknown flag", []string{"hash", "--bogus", "k"}, exitUsage, "unknown flag"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d stderr %q; want exit %d, one line containing %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
}

// capture returns globals that print to a buffer in the given form.
func capture(output string) (*bytes.Buffer, *globals) {
	var out bytes.Buffer
	return &out, &globals{output: output, stdout: &out, stderr: &out, tty: func() bool { return false }}
}
