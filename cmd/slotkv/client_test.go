package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLoadValue(t *testing.T) {
	for _, size := range []int{1, 31, 32, 33, 100, 1000} {
		a, b := loadValue([]byte("key:7"), size), loadValue([]byte("key:7"), size)
		if len(a) != size || !bytes.Equal(a, b) {
			t.Fatalf("size %d: got %d bytes, deterministic=%v", size, len(a), bytes.Equal(a, b))
		}
		if bytes.Equal(a, loadValue([]byte("key:8"), size)) && size >= 8 {
			t.Fatalf("size %d: two keys share a value", size)
		}
	}
	if !bytes.HasPrefix(loadValue([]byte("k"), 100), loadValue([]byte("k"), 40)) {
		t.Fatal("a shorter value is not a prefix of a longer one: check would need the exact --size")
	}
}

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
