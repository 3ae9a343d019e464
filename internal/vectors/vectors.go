package vectors

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ExtraEnv names the folder of another implementation's vectors that
// Extra lists.
const ExtraEnv = "SLOTD_EXTRA_VECTORS"

// Read calls fn with the tab-separated fields of every line of the file at
// path that is neither blank nor a comment, and where ("path:line") for
// fn's messages, and returns how many lines it passed to fn. A file that
// cannot be read fails t.
func Read(t testing.TB, path string, fn func(where string, fields []string)) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open vectors: %v", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") || strings.TrimSpace(text) == "" {
			continue
		}
		fn(path+":"+strconv.Itoa(line), strings.Split(text, "\t"))
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read vectors %s: %v", path, err)
	}
	return n
}

// Extra returns the files matching pattern (a filepath.Match pattern such
// as "slots*.tsv") in the folder $SLOTD_EXTRA_VECTORS names, where other
// implementations write their outputs to be pinned against ours. It skips
// t when the variable is not set; a folder with no matching file returns
// none, and the caller says whether that is an error.
func Extra(t testing.TB, pattern string) []string {
	t.Helper()
	dir := os.Getenv(ExtraEnv)
	if dir == "" {
		t.Skip(ExtraEnv + " not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return files
}
