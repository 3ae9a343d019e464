package ringcompat

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
)

// TestMD5RingTable reproduces the published md5 ring simulation's table
// exactly: 100,000 keys user:i on
// servers server0..server3, then server4 added, with keys and points hashed
// by the first 16 hex digits of md5 and Python's bisect.bisect (first point
// strictly greater) as the successor. It pins the MD5 hash mode.
func TestMD5RingTable(t *testing.T) {
	const keys = 100_000
	hashes := make([]uint64, keys)
	for i := range hashes {
		hashes[i] = MD5.KeyString("user:" + strconv.Itoa(i))
	}
	servers := func(n int) []Node {
		nodes := make([]Node, n)
		for s := range nodes {
			nodes[s] = Node{ID: "server" + strconv.Itoa(s), Weight: 1}
		}
		return nodes
	}
	// owners maps every key to a server number for n servers.
	type scheme func(t *testing.T, n int) []int
	modN := func(_ *testing.T, n int) []int {
		out := make([]int, keys)
		for i, h := range hashes {
			out[i] = int(h % uint64(n))
		}
		return out
	}
	ring := func(vnodes int) scheme {
		return func(t *testing.T, n int) []int {
			r, err := New(Config{Hash: MD5, VNodes: vnodes, StrictSuccessor: true}, servers(n)...)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]int, keys)
			for i, h := range hashes {
				// Node indexes follow id order, which is server order below 10.
				out[i] = r.LookupHash(h)
			}
			return out
		}
	}
	cases := []struct {
		name     string
		owners   scheme
		moved    string // percent, one decimal, as the seed prints it
		min, max int
		onlyNew  bool // every moved key went to the new server
	}{
		{"mod N", modN, "79.9", 24851, 25194, false},
		{"ring, 1 pt", ring(1), "9.0", 10134, 42472, true},
		{"ring, 100 pts", ring(100), "22.4", 22248, 27397, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, after := tc.owners(t, 4), tc.owners(t, 5)
			moved := 0
			counts := make([]int, 4)
			for i := range before {
				counts[before[i]]++
				if before[i] != after[i] {
					moved++
					if tc.onlyNew && after[i] != 4 {
						t.Fatalf("key user:%d moved from server%d to server%d, not to the new server4", i, before[i], after[i])
					}
				}
			}
			if got := fmt.Sprintf("%.1f", 100*float64(moved)/keys); got != tc.moved {
				t.Errorf("moved %s%% (%d keys), want %s%%", got, moved, tc.moved)
			}
			if lo, hi := slices.Min(counts), slices.Max(counts); lo != tc.min || hi != tc.max {
				t.Errorf("keys per server min/max = %d/%d, want %d/%d", lo, hi, tc.min, tc.max)
			}
		})
	}
}
