package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/slotkv/kvtest"
)

// TestClientCommandsAgainstCluster runs put, get, load, check and traffic
// against an in-process slotd and two slotkv stores and reads what each
// printed: the summary of load, check and traffic (one body) and the
// failures they report.
func TestClientCommandsAgainstCluster(t *testing.T) {
	c := kvtest.New(t, 2)
	exec := func(t *testing.T, newCmd func(io.Writer) *cobra.Command, args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := newCmd(&out)
		cmd.SetArgs(append([]string{"--slotd", c.Slotd}, args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	summary := func(t *testing.T, out string) Summary {
		t.Helper()
		var s Summary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("summary %q: %v", out, err)
		}
		return s
	}

	if out, err := exec(t, newPutCmd, "user:1", "v1"); err != nil || out != "version 1\n" {
		t.Fatalf("put: %q, %v; want version 1", out, err)
	}
	if out, err := exec(t, newGetCmd, "user:1", "-o", "json"); err != nil || !strings.Contains(out, `"value": "v1"`) {
		t.Fatalf("get: %q, %v; want value v1", out, err)
	}
	if _, err := exec(t, newGetCmd, "user:2"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("get of a missing key: %v, want not found", err)
	}

	for _, tc := range []struct {
		name    string
		newCmd  func(io.Writer) *cobra.Command
		args    []string
		want    Summary // Seconds and Redirects not compared
		wantErr string
	}{
		{"load", newLoadCmd, []string{"--keys", "300", "--size", "20"},
			Summary{Command: "load", Ops: 300, Writes: 300}, ""},
		{"check", newCheckCmd, []string{"--keys", "300", "--size", "20"},
			Summary{Command: "check", Ops: 300, Reads: 300}, ""},
		{"check of another size", newCheckCmd, []string{"--keys", "300", "--size", "21"},
			Summary{Command: "check", Ops: 300, Reads: 300, Bad: 300}, "check: 300 keys missing or wrong, 0 reads failed"},
		{"traffic", newTrafficCmd, []string{"--keys", "300", "--size", "20", "--duration", "300ms", "--rate", "200"},
			Summary{Command: "traffic"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec(t, tc.newCmd, append(tc.args, "-o", "json")...)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			got := summary(t, out)
			if tc.name == "traffic" {
				if got.Command != "traffic" || got.Ops != got.Reads+got.Writes || got.Errors != 0 || got.Bad != 0 {
					t.Fatalf("traffic summary %+v: want ops = reads + writes, no errors", got)
				}
				return
			}
			got.Seconds, got.Redirects, got.Examples = 0, 0, nil
			if got.Command != tc.want.Command || got.Ops != tc.want.Ops || got.Reads != tc.want.Reads || got.Writes != tc.want.Writes ||
				got.Errors != tc.want.Errors || got.Bad != tc.want.Bad || got.Fenced != 0 {
				t.Fatalf("summary %+v, want %+v", got, tc.want)
			}
		})
	}
}
