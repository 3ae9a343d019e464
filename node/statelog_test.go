package node

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

func TestStateLogReplay(t *testing.T) {
	tests := []struct {
		name string
		// damage edits the file after the writes; want is then the live
		// records a reopen must see, or wantErr a refusal.
		damage  func(b []byte) []byte
		wantErr bool
		dropped int // trailing writes the damage removed
	}{
		{name: "clean"},
		{name: "torn last append", damage: func(b []byte) []byte { return b[:len(b)-3] }, dropped: 1},
		{name: "garbage after the last line", damage: func(b []byte) []byte { return append(b, "1234"...) }},
		{name: "flipped byte in a middle line", damage: func(b []byte) []byte {
			b = bytes.Clone(b)
			b[20] ^= 0x01
			return b
		}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := openStateLog(dir)
			if err != nil {
				t.Fatal(err)
			}
			type op struct {
				key, value string
				del        bool
			}
			ops := []op{
				{"fence/1", "7 m-a", false},
				{"drop/2", "1000", false},
				{"import/3", `{"MoveID":"m b","LastBatchSeq":4}`, false},
				{"fence/1", "", true},
				{"fence/4", "9", false},
			}
			want := map[string]string{}
			for i, o := range ops {
				if o.del {
					err = l.delete(o.key, true)
				} else {
					err = l.set(o.key, o.value, i%2 == 0)
				}
				if err != nil {
					t.Fatal(err)
				}
				if i < len(ops)-tc.dropped {
					if o.del {
						delete(want, o.key)
					} else {
						want[o.key] = o.value
					}
				}
			}
			if err := l.close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, stateLogFile)
			if tc.damage != nil {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, tc.damage(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			l, err = openStateLog(dir)
			if tc.wantErr {
				if err == nil {
					l.close()
					t.Fatal("a corrupt state log was accepted")
				}
				if !strings.Contains(err.Error(), "corrupt") {
					t.Fatalf("error %q does not say the log is corrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.close()
			if got := l.snapshot(); !maps.Equal(got, want) {
				t.Fatalf("replayed %v, want %v", got, want)
			}
			// The log goes on after a cut tail: a new record is read back.
			if err := l.set("drop/9", "5", true); err != nil {
				t.Fatal(err)
			}
			l.close()
			l2, err := openStateLog(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.close()
			want["drop/9"] = "5"
			if got := l2.snapshot(); !maps.Equal(got, want) {
				t.Fatalf("after another append: %v, want %v", got, want)
			}
		})
	}
}

func TestStateLogCompacts(t *testing.T) {
	dir := t.TempDir()
	l, err := openStateLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 5000 {
		key := fmt.Sprintf("import/%d", i%40)
		value := fmt.Sprintf(`{"LastBatchSeq":%d}`, i)
		if err := l.set(key, value, false); err != nil {
			t.Fatal(err)
		}
		want[key] = value
	}
	l.close()
	info, err := os.Stat(filepath.Join(dir, stateLogFile))
	if err != nil {
		t.Fatal(err)
	}
	// 40 live records; without compaction the file would hold 5,000.
	if lines := info.Size() / 40; lines > 2*40+256+1 {
		t.Fatalf("state log of %d bytes (about %d records) for 40 live ones: not compacted", info.Size(), lines)
	}
	l, err = openStateLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if got := l.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("after compaction: %d records, want %d", len(got), len(want))
	}
}

// TestStateFilesMigrate starts a node on the state files of the earlier
// layout (a file each for fences, drops and imports): it must keep all of
// it, move it into the state log and remove the old files.
func TestStateFilesMigrate(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		fenceFile:        "12 7 m-a\n40 8\n",
		dropFile:         "13 1000\n",
		"import-14.json": `{"MoveID":"m-b","LastBatchSeq":3,"SnapshotDone":true}`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 { // the second start reads the log alone
		n, err := New(Config{ID: "a", Store: newMemStore(), Map: new(StaticMap), StateDir: dir})
		if err != nil {
			t.Fatalf("start %d: %v", round, err)
		}
		if fi := n.fences[slots.MustNew(12)]; fi.Version != 7 || fi.MoveID != "m-a" {
			t.Errorf("start %d: fence of slot 12 = %+v", round, fi)
		}
		if fi, ok := n.fences[slots.MustNew(40)]; !ok || fi.Version != 8 {
			t.Errorf("start %d: fence of slot 40 = %+v, %v", round, fi, ok)
		}
		if !n.Fenced(slots.MustNew(12)) {
			t.Errorf("start %d: slot 12 not fenced", round)
		}
		if n.dropping[slots.MustNew(13)] != 1000 {
			t.Errorf("start %d: drops %v", round, n.dropping)
		}
		if st := n.ImportStatus(slots.MustNew(14), "m-b"); st.LastBatchSeq != 3 || !st.SnapshotDone {
			t.Errorf("start %d: import of slot 14 = %+v", round, st)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		for name := range files {
			if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
				t.Errorf("start %d: %s still there (%v)", round, name, err)
			}
		}
	}
}

// TestFenceSurvivesRestartInLog: a fence set, then the node closed and
// opened again, is still in force; an unfence too.
func TestFenceSurvivesRestartInLog(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func() *Node {
		n, err := New(Config{ID: "a", Store: newMemStore(), Map: new(StaticMap), StateDir: dir, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	a, b := slots.MustNew(100), slots.MustNew(200)
	for _, s := range []slots.Slot{a, b} {
		if _, err := n.Fence(ctx, s, "mv", 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Unfence(ctx, b); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = open()
	defer n.Close()
	if !n.Fenced(a) || n.Fenced(b) {
		t.Fatalf("after restart: slot 100 fenced %v (want true), slot 200 fenced %v (want false)", n.Fenced(a), n.Fenced(b))
	}
}
