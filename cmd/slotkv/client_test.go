package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestClientUsage: bad flags of the client commands exit 2 before any
// connection is tried.
func TestClientUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero size", []string{"load", "--size", "0"}, "--size"},
		{"negative keys", []string{"check", "--keys", "-1"}, "--keys"},
		{"bad output", []string{"get", "k", "-o", "yaml"}, "unknown output"},
		{"traffic rate", []string{"traffic", "--rate", "0"}, "--rate"},
		{"zero timeout", []string{"load", "--timeout", "0s"}, "--timeout"},
		{"put needs two args", []string{"put", "k"}, "accepts 2 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			code := run(ctx, tc.args, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}
