package migrations_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newDir(t *testing.T, cli *clientv3.Client, maxSchema int) *directory.Directory {
	t.Helper()
	d, err := directory.New(directory.Config{Client: cli, MaxSchema: maxSchema})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDefaultReachesDirectorySchema(t *testing.T) {
	if got := migrations.Default().Latest(); got != directory.SchemaVersion {
		t.Fatalf("Default().Latest() = %d, directory.SchemaVersion = %d", got, directory.SchemaVersion)
	}
}

func TestNewRegistryRejectsBadLists(t *testing.T) {
	up := func(context.Context, *directory.Directory) error { return nil }
	cases := []struct {
		name  string
		steps []migrations.Migration
	}{
		{"empty", nil},
		{"starts at 2", []migrations.Migration{{Version: 2, Name: "x", Up: up}}},
		{"gap", []migrations.Migration{{Version: 1, Name: "a", Up: up}, {Version: 3, Name: "c", Up: up}}},
		{"out of order", []migrations.Migration{{Version: 2, Name: "b", Up: up}, {Version: 1, Name: "a", Up: up}}},
		{"no name", []migrations.Migration{{Version: 1, Up: up}}},
		{"no up", []migrations.Migration{{Version: 1, Name: "a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := migrations.NewRegistry(tc.steps...); !errors.Is(err, migrations.ErrBadRegistry) {
				t.Fatalf("err = %v, want ErrBadRegistry", err)
			}
		})
	}
}

func TestApplyCreatesLayoutOnceAndIsIdempotent(t *testing.T) {
	c := etcdtest.New(t)
	d := newDir(t, c.Client(), 0)
	ctx := testCtx(t)
	if _, err := d.RegisterNode(ctx, directory.Node{ID: "a", Addr: "127.0.0.1:1", Weight: 1}); !errors.Is(err, directory.ErrNoSchema) {
		t.Fatalf("directory before migrations: err = %v, want ErrNoSchema", err)
	}
	applied, err := migrations.Apply(ctx, d)
	if err != nil || !slices.Equal(applied, []int{1, 2, 3}) {
		t.Fatalf("first Apply = %v, %v; want [1 2 3]", applied, err)
	}
	if s, err := d.Schema(ctx); err != nil || s != directory.SchemaVersion {
		t.Fatalf("schema = %d, %v; want %d", s, err, directory.SchemaVersion)
	}
	applied, err = migrations.Apply(ctx, d)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing applied", applied, err)
	}
	if _, err := d.Bootstrap(ctx, []directory.Node{{ID: "a", Addr: "127.0.0.1:1", Weight: 1}}, 8, "t"); err != nil {
		t.Fatalf("bootstrap after migrations: %v", err)
	}
}

func TestConcurrentApplyRunsEachStepOnce(t *testing.T) {
	c := etcdtest.New(t)
	var runs [3]atomic.Int32
	step := func(v int) migrations.Migration {
		return migrations.Migration{Version: v, Name: fmt.Sprintf("step %d", v), Up: func(ctx context.Context, d *directory.Directory) error {
			runs[v-1].Add(1)
			if v == 1 {
				return d.InitLayout(ctx)
			}
			return nil
		}}
	}
	reg, err := migrations.NewRegistry(step(1), step(2), step(3))
	if err != nil {
		t.Fatal(err)
	}
	// Four "processes", each with its own etcd connection, start together.
	const procs = 4
	var wg sync.WaitGroup
	applied := make([][]int, procs)
	errs := make([]error, procs)
	start := make(chan struct{})
	for i := range procs {
		d := newDir(t, c.NewClient(t), reg.Latest())
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = reg.Apply(testCtx(t), d)
		}()
	}
	close(start)
	wg.Wait()
	var all []int
	for i := range procs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
		all = append(all, applied[i]...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{1, 2, 3}) {
		t.Fatalf("steps applied across processes = %v, want each of 1, 2, 3 once", all)
	}
	for i := range runs {
		if n := runs[i].Load(); n != 1 {
			t.Errorf("step %d ran %d times, want 1", i+1, n)
		}
	}
}

func TestUpgradeRewritingDataKeepsOwners(t *testing.T) {
	c := etcdtest.New(t)
	ctx := testCtx(t)
	v1 := newDir(t, c.Client(), 1)
	reg1, err := migrations.NewRegistry(migrationsDefaultSteps()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg1.Apply(ctx, v1); err != nil {
		t.Fatal(err)
	}
	var nodes []directory.Node
	for _, id := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, directory.Node{ID: id, Addr: "127.0.0.1:7000", Weight: 1})
	}
	snap, err := v1.Bootstrap(ctx, nodes, 0, "t")
	if err != nil {
		t.Fatal(err)
	}
	// "a0" sorts first, so renumbering nodes in id order changes every
	// index and so every owners chunk.
	if _, err := v1.RegisterNode(ctx, directory.Node{ID: "a0", Addr: "127.0.0.1:7001", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	set := snap.SlotsOf("n2")
	moved := 0
	for s := range set.All() {
		if moved == 5 {
			break
		}
		mv, err := v1.BeginMove(ctx, directory.MoveSpec{Slot: s, From: "n2", To: "a0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v1.AdvanceMove(ctx, s, mv.MoveID, directory.PhaseFenced); err != nil {
			t.Fatal(err)
		}
		if _, err := v1.CommitMove(ctx, s, mv.MoveID, "t"); err != nil {
			t.Fatal(err)
		}
		moved++
	}
	// One move stays in flight across the upgrade.
	inFlight := slots.MustNew(0)
	owner0 := snap.Owner(inFlight)
	to := "n1"
	if owner0 == "n1" {
		to = "n3"
	}
	mv, err := v1.BeginMove(ctx, directory.MoveSpec{Slot: inFlight, From: owner0, To: to})
	if err != nil {
		t.Fatal(err)
	}
	before, err := v1.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rawBefore := readAll(t, c.Client())

	reg, err := migrations.NewRegistry(append(migrationsDefaultSteps(), migrations.Migration{
		Version: 2, Name: "test: renumber nodes in id order",
		Up: func(ctx context.Context, d *directory.Directory) error {
			_, err := d.ReindexNodes(ctx, "migration 2")
			return err
		},
	})...)
	if err != nil {
		t.Fatal(err)
	}
	v2 := newDir(t, c.Client(), 2)
	applied, err := reg.Apply(ctx, v2)
	if err != nil || !slices.Equal(applied, []int{2}) {
		t.Fatalf("upgrade = %v, %v; want [2]", applied, err)
	}
	after, err := v2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after.Owners(), before.Owners()) {
		t.Fatal("upgrade changed slot owners")
	}
	if !slices.Equal(after.Moves, before.Moves) {
		t.Fatalf("upgrade changed moves: %v -> %v", before.Moves, after.Moves)
	}
	if after.Version != before.Version+1 {
		t.Errorf("version %d -> %d, want one versioned change", before.Version, after.Version)
	}
	if changed := changedValues(rawBefore, readAll(t, c.Client())); changed < 64 {
		t.Errorf("only %d stored values changed; the migration should rewrite every owners chunk", changed)
	}
	// The move in flight finishes under the new schema.
	if _, err := v2.AdvanceMove(ctx, inFlight, mv.MoveID, directory.PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.CommitMove(ctx, inFlight, mv.MoveID, "t"); err != nil {
		t.Fatal(err)
	}
	// Running the upgrade again changes nothing.
	if applied, err := reg.Apply(ctx, v2); err != nil || len(applied) != 0 {
		t.Fatalf("second upgrade = %v, %v", applied, err)
	}

	// The old binary refuses the new schema, naming both versions.
	_, err = reg1.Apply(ctx, v1)
	if !errors.Is(err, migrations.ErrSchemaTooNew) {
		t.Fatalf("old binary Apply: err = %v, want ErrSchemaTooNew", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "found schema 2") || !strings.Contains(msg, "up to schema 1") {
		t.Errorf("message %q should name the schema found (2) and supported (1)", msg)
	}
	if _, err := v1.Snapshot(ctx); !errors.Is(err, directory.ErrSchemaTooNew) {
		t.Fatalf("old binary read: err = %v, want ErrSchemaTooNew", err)
	}
}

// migrationsDefaultSteps rebuilds the default step 1 through the public
// API, as a binary adding step 2 would list it.
func migrationsDefaultSteps() []migrations.Migration {
	return []migrations.Migration{{Version: 1, Name: "create layout", Up: func(ctx context.Context, d *directory.Directory) error {
		return d.InitLayout(ctx)
	}}}
}

// readAll returns every key and value in etcd (the test compares raw bytes
// without knowing the layout).
func readAll(t *testing.T, cli *clientv3.Client) map[string][]byte {
	t.Helper()
	resp, err := cli.Get(testCtx(t), "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

func changedValues(a, b map[string][]byte) int {
	n := 0
	for k, v := range a {
		if w, ok := b[k]; ok && !bytes.Equal(v, w) {
			n++
		}
	}
	return n
}
