package node

import (
	"bytes"
	"testing"
)

// FuzzReadRecord: any bytes either decode to a record that re-encodes to
// the same bytes, or are refused; never a panic or an over-read.
func FuzzReadRecord(f *testing.F) {
	f.Add(appendRecord(nil, 7, recPut, []byte("key"), []byte("value")))
	f.Add(appendRecord(nil, 0, recHeader, []byte("move-1"), nil))
	f.Add(appendRecord(nil, 1<<62, recDelete, []byte("k"), nil))
	f.Add([]byte{0, 0, 0, 10, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		seq, kind, key, val, n, err := readRecord(bytes.NewReader(data))
		if err != nil {
			return
		}
		if n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		if got := appendRecord(nil, seq, kind, key, val); !bytes.Equal(got, data[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", got, data[:n])
		}
	})
}
