package node

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

// TestCaptureSurvivesRestart: captured changes come back after a restart,
// a torn record at the log's end (a crash mid-append) is cut off, and new
// changes continue the sequence.
func TestCaptureSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	st := newMemStore()
	n := newTestNode(t, st, m, dir)
	key := "{c}:1"
	s := slots.ForString(key)
	base, err := n.StartCapture(ctx, s, "mv")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := n.Write(ctx, []byte(key), put(key, v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Write(ctx, []byte(key), func() ([]Mutation, error) { return []Mutation{{Key: []byte(key), Delete: true}}, nil }); err != nil {
		t.Fatal(err)
	}
	n.Close()
	f, err := os.OpenFile(capturePath(dir, s), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendRecord(nil, base+5, recPut, []byte(key), []byte("torn"))
	f.Write(torn[:len(torn)-3])
	f.Close()

	n2 := newTestNode(t, st, m, dir)
	if err := n2.Write(ctx, []byte(key), put(key, "e")); err != nil {
		t.Fatal(err)
	}
	b, err := n2.Changes(ctx, s, "mv", base, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, c := range b.Changes {
		if c.Seq != base+uint64(i)+1 {
			t.Fatalf("change %d has seq %d, want %d", i, c.Seq, base+uint64(i)+1)
		}
		if c.Delete {
			got = append(got, "-")
		} else {
			got = append(got, string(c.Value))
		}
	}
	if want := []string{"a", "b", "c", "-", "e"}; !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if _, err := n2.Changes(ctx, s, "other", base, 0, false); !errors.Is(err, ErrMoveMismatch) {
		t.Fatalf("another move's id: %v, want ErrMoveMismatch", err)
	}
	if _, err := n2.Changes(ctx, s, "mv", base-1, 0, false); !errors.Is(err, ErrCaptureLost) {
		t.Fatalf("changes before the snapshot: %v, want ErrCaptureLost", err)
	}
	// A new capture of the slot numbers above every earlier change.
	base2, err := n2.StartCapture(ctx, s, "mv2")
	if err != nil {
		t.Fatal(err)
	}
	if base2 <= base+5 {
		t.Fatalf("new capture starts at %d, at or below the old capture's %d", base2, base+5)
	}
}

// TestChangesWaitEndsAtFence: a follower waiting for changes wakes on the
// fence and learns the fence sequence.
func TestChangesWaitEndsAtFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n := newTestNode(t, newMemStore(), m, t.TempDir())
	key := "{f}:1"
	s := slots.ForString(key)
	base, err := n.StartCapture(ctx, s, "mv")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Write(ctx, []byte(key), put(key, "a")); err != nil {
		t.Fatal(err)
	}
	got := make(chan ChangeBatch, 1)
	go func() {
		b, err := n.Changes(ctx, s, "mv", base+1, 0, true)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	fs, err := n.Fence(ctx, s, "mv", 1)
	if err != nil {
		t.Fatal(err)
	}
	b := <-got
	if fs != base+1 || b.FenceSeq != fs || len(b.Changes) != 0 {
		t.Fatalf("fence seq %d, batch %+v; want fence at %d and no changes", fs, b, base+1)
	}
}

// TestEmptyCaptureLostInRestartIsReported: a capture that saw no write has
// no log file; after a restart it is gone, and the mover is told so
// (ErrCaptureLost makes it restart the move), never handed an empty,
// silently incomplete change stream.
func TestEmptyCaptureLostInRestartIsReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	st := newMemStore()
	n := newTestNode(t, st, m, dir)
	s := slots.ForString("{e}:1")
	base, err := n.StartCapture(ctx, s, "mv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(capturePath(dir, s)); !os.IsNotExist(err) {
		t.Fatalf("a capture without changes has a log file (%v)", err)
	}
	n.Close()
	n2 := newTestNode(t, st, m, dir)
	if err := n2.Write(ctx, []byte("{e}:1"), put("{e}:1", "after restart")); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.Changes(ctx, s, "mv", base, 0, false); !errors.Is(err, ErrCaptureLost) {
		t.Fatalf("changes of a capture lost in a restart: %v, want ErrCaptureLost", err)
	}
}
