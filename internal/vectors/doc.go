// Package vectors reads the pinned test-vector files that fix slotd's
// hashes and assignments bit for bit (slots/testdata/slots.tsv,
// ringcompat/testdata/*.tsv): tab-separated fields, one vector a line,
// blank lines and lines starting with '#' ignored. It is for tests only.
//
// Usage:
//
//	n := vectors.Read(t, "testdata/slots.tsv", func(where string, fields []string) {
//		if len(fields) != 3 {
//			t.Fatalf("%s: want 3 fields", where) // where is "path:line"
//		}
//		...
//	})
//	for _, f := range vectors.Extra(t, "slots*.tsv") { // $SLOTD_EXTRA_VECTORS
//		...
//	}
package vectors
