package linz

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/slotd/slotd/slotkv/workload"
)

func put(c int, key, val string, call, ret int64, ver uint64) workload.Op {
	return workload.Op{Client: c, Kind: workload.Put, Key: key, Value: val, Call: call, Return: ret, Version: ver}
}

func get(c int, key, val string, call, ret int64, ver uint64) workload.Op {
	return workload.Op{Client: c, Kind: workload.Get, Key: key, Got: val, Found: ver > 0, Call: call, Return: ret, Version: ver}
}

func cas(c int, key string, exp uint64, val string, call, ret int64, swapped bool, ver uint64) workload.Op {
	return workload.Op{Client: c, Kind: workload.CAS, Key: key, Expected: exp, Value: val, Call: call, Return: ret, Swapped: swapped, Version: ver}
}

func unknown(op workload.Op) workload.Op {
	op.Err, op.Unknown, op.Version, op.Swapped = "deadline exceeded", true, 0, false
	return op
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []workload.Op
		want porcupine.CheckResult
	}{
		{"sequential", []workload.Op{
			put(0, "a", "x", 0, 1, 1), get(1, "a", "x", 2, 3, 1), cas(0, "a", 1, "y", 4, 5, true, 2), get(1, "a", "y", 6, 7, 2),
		}, porcupine.Ok},
		{"concurrent puts either order", []workload.Op{
			put(0, "a", "x", 0, 10, 2), put(1, "a", "y", 0, 10, 1), get(2, "a", "x", 11, 12, 2),
		}, porcupine.Ok},
		{"stale read after acknowledged put", []workload.Op{
			put(0, "a", "x", 0, 1, 1), put(0, "a", "y", 2, 3, 2), get(1, "a", "x", 4, 5, 1),
		}, porcupine.Illegal},
		{"lost write: key absent after put", []workload.Op{
			put(0, "a", "x", 0, 1, 1), get(1, "a", "", 2, 3, 0),
		}, porcupine.Illegal},
		{"failed cas must not swap", []workload.Op{
			put(0, "a", "x", 0, 1, 1), cas(1, "a", 0, "y", 2, 3, false, 1), get(1, "a", "x", 4, 5, 1),
		}, porcupine.Ok},
		{"cas swapped on a stale version", []workload.Op{
			put(0, "a", "x", 0, 1, 1), cas(1, "a", 0, "y", 2, 3, true, 1),
		}, porcupine.Illegal},
		{"unknown put seen later", []workload.Op{
			unknown(put(0, "a", "x", 0, 1, 0)), get(1, "a", "x", 5, 6, 1),
		}, porcupine.Ok},
		{"unknown put never seen", []workload.Op{
			unknown(put(0, "a", "x", 0, 1, 0)), get(1, "a", "", 5, 6, 0),
		}, porcupine.Ok},
		{"keys independent", []workload.Op{
			put(0, "a", "x", 0, 1, 1), put(1, "b", "x", 0, 1, 1), get(2, "b", "x", 2, 3, 1), get(2, "a", "x", 4, 5, 1),
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(workload.History{Ops: tc.ops}, 10*time.Second)
			if res.Outcome != tc.want {
				t.Fatalf("Check = %s, want %s", res.Outcome, tc.want)
			}
		})
	}
}

// TestRefusedLeftOut: a write refused on every attempt never happened, so a
// read that does not see it is fine and the op is not handed to porcupine.
func TestRefusedLeftOut(t *testing.T) {
	ref := put(0, "a", "x", 0, 1, 0)
	ref.Err, ref.Refused = "too many redirects", true
	h := workload.History{Ops: []workload.Op{ref, get(1, "a", "", 2, 3, 0)}}
	if n := len(Operations(h)); n != 1 {
		t.Fatalf("Operations kept %d ops, want 1", n)
	}
	if res := Check(h, 10*time.Second); !res.OK() {
		t.Fatalf("Check = %s, want Ok", res.Outcome)
	}
}

func TestVisualize(t *testing.T) {
	res := Check(workload.History{Ops: []workload.Op{put(0, "a", "x", 0, 1, 1), get(1, "a", "", 2, 3, 0)}}, 10*time.Second)
	path := filepath.Join(t.TempDir(), "history.html")
	if err := res.Visualize(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization not written: %v", err)
	}
}
