package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/slotd/slotd/"

// leafImport says whether an internal/ package may import path: anything
// outside the module, and of the module only slots, api and internal.
func leafImport(path string) bool {
	rest, ours := strings.CutPrefix(path, module)
	if !ours {
		return true
	}
	top, _, _ := strings.Cut(rest, "/")
	return top == "slots" || top == "api" || top == "internal"
}

// TestInternalImportsOnlyLeaves: internal/ holds leaves every room may use,
// so its code (its tests aside, as go list -deps sees it) imports nothing of slotd's but slots, api
// and other leaves; a harness that starts slotd or a store lives next to
// what it starts (docs/architecture.md, "The arrows").
func TestInternalImportsOnlyLeaves(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			if !leafImport(p) {
				t.Errorf("%s imports %s: internal/ may import only slots, api and internal/; move the code next to what it uses", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go file under internal/")
	}
}

func TestLeafImport(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"fmt", true},
		{"go.etcd.io/etcd/client/v3", true},
		{module + "slots", true},
		{module + "api/slotmap", true},
		{module + "internal/backoff", true},
		{module + "server", false},
		{module + "slotkv/kvclient", false},
		{module + "apiserver", false},
	} {
		if got := leafImport(tc.path); got != tc.want {
			t.Errorf("leafImport(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
