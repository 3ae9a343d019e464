package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/slotd/slotd/directory"
)

// TestBackupCommand: slotctl backup FILE saves a document slotd restore
// reads, at the directory's version, readable by its owner only.
func TestBackupCommand(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	file := filepath.Join(t.TempDir(), "dir.json")
	var got backupJSON
	if err := json.Unmarshal([]byte(s.ok(t, "backup", file, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := directory.ParseBackup(doc)
	if err != nil {
		t.Fatal(err)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(s.ok(t, "status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if b.Version != st.Version || got.Version != st.Version || got.Bytes != len(doc) || b.ClusterID == "" {
		t.Fatalf("backup at %d (reported %d, %d bytes of %d), status at %d, cluster %q", b.Version, got.Version, got.Bytes, len(doc), st.Version, b.ClusterID)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v %v", fi.Mode(), err)
	}
	if r := s.run(t, "", "backup", filepath.Join(t.TempDir(), "no", "such", "dir", "x.json")); r.code != exitFailure {
		t.Fatalf("unwritable path: exit %d", r.code)
	}
}
