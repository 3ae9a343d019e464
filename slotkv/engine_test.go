package slotkv

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/slotd/slotd/client/node"
	"github.com/slotd/slotd/slots"
)

// TestPageSize: a new data file gets DefaultPageSize; a file made with
// another page size (bbolt's 4 KiB, what earlier slotkv versions wrote)
// keeps it and its data when opened with the new default.
func TestPageSize(t *testing.T) {
	key := []byte("user:42")
	s := slots.ForKey(key)
	tests := []struct {
		name    string
		created int // page size the file is made with (0: the default)
		want    int
	}{
		{"new file", 0, DefaultPageSize},
		{"file of an earlier version", 4096, 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "slotkv.db")
			e, err := OpenEngine(path, EngineOptions{PageSize: tc.created})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Apply(context.Background(), s, []node.Mutation{{Key: key, Value: EncodeValue(1, []byte("v1"))}}); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e, err = OpenEngine(path, EngineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := e.db.Info().PageSize; got != tc.want {
				t.Errorf("page size = %d, want %d", got, tc.want)
			}
			if raw, err := e.Get(key); err != nil || raw == nil {
				t.Fatalf("Get after reopen: %q, %v", raw, err)
			}
		})
	}
}
