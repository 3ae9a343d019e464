// Package docs holds slotd's design and reference pages. Its only Go code
// is this test, which keeps README.md's layout section true to the tree.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// layoutBlock returns the code block under README.md's "## Layout".
func layoutBlock(t *testing.T, readme string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	_, after, ok = strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("README.md's layout section has no code block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("README.md's layout code block is not closed")
	}
	return block
}

var (
	// entryRE is the start of a layout line naming top-level directories:
	// "slots/  ..." or "auth/, tlsconf/  ...".
	entryRE = regexp.MustCompile(`^([a-z0-9]+/(?:, [a-z0-9]+/)*)\s`)
	// pathRE is a path the descriptions name below a top-level directory:
	// mover/planner, directory/keys.go, server/servertest. One right after
	// a slash is part of a URL (/api/v1/), not a path.
	pathRE = regexp.MustCompile(`\b[a-z0-9]+(?:/[a-z0-9_-]+)+(?:\.[a-z]+)?\b`)
)

// layout returns the top-level directories the layout block lists and the
// deeper paths its descriptions name.
func layout(block string) (dirs, paths []string) {
	for _, line := range strings.Split(block, "\n") {
		if m := entryRE.FindStringSubmatch(line); m != nil {
			for _, d := range strings.Split(m[1], ", ") {
				dirs = append(dirs, strings.TrimSuffix(d, "/"))
			}
		}
		for _, m := range pathRE.FindAllStringIndex(line, -1) {
			if m[0] == 0 || line[m[0]-1] != '/' {
				paths = append(paths, line[m[0]:m[1]])
			}
		}
	}
	return dirs, paths
}

// documented says whether dir holds Go code or docs (.go or .md files) at
// any depth.
func documented(t *testing.T, dir string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".go" || ext == ".md") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestReadmeLayoutMatchesTree: every top-level directory with Go code or
// docs is in README.md's layout, and every directory or file the layout
// names exists.
func TestReadmeLayoutMatchesTree(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, paths := layout(layoutBlock(t, string(readme)))
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		// Hidden directories and bin/ (build output) are not the project's layout.
		if !e.IsDir() || strings.HasPrefix(name, ".") || name == "bin" {
			continue
		}
		if documented(t, filepath.Join(root, name)) && !slices.Contains(dirs, name) {
			t.Errorf("%s/ holds Go code or docs but README.md's layout does not list it: add a line saying what it holds", name)
		}
	}
	for _, p := range append(dirs, paths...) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("README.md's layout names %s, which is not in the tree: %v", p, err)
		}
	}
}

// TestLayoutParse pins what the parser reads from a layout block, so that
// the test above cannot pass by reading nothing.
func TestLayoutParse(t *testing.T) {
	block := "slots/       key -> slot. No dependencies.\n" +
		"mover/       planner (mover/planner: pure) and executor.\n" +
		"             server/servertest starts it; directory/keys.go.\n" +
		"auth/, tlsconf/  roles and bearer tokens (see docs/threat-model.md).\n" +
		"console/     the web console (/ui/, JSON under /api/v1/).\n"
	dirs, paths := layout(block)
	if want := []string{"slots", "mover", "auth", "tlsconf", "console"}; !slices.Equal(dirs, want) {
		t.Errorf("dirs %q, want %q", dirs, want)
	}
	if want := []string{"mover/planner", "server/servertest", "directory/keys.go", "docs/threat-model.md"}; !slices.Equal(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
}
