package workload

import (
	"strings"
	"testing"

	"github.com/slotd/slotd/slotkv/kvclient"
)

func TestLostWrites(t *testing.T) {
	put := func(key, val string, ver uint64) Op { return Op{Kind: Put, Key: key, Value: val, Version: ver} }
	final := func(key, got string, ver uint64) Op {
		return Op{Kind: Get, Key: key, Got: got, Version: ver, Found: ver > 0, Final: true}
	}
	failed := func(op Op) Op { op.Err, op.Unknown, op.Version = "timeout", true, 0; return op }
	for _, tc := range []struct {
		name string
		ops  []Op
		want string // substring of the only report line; "" for none
	}{
		{"latest value read back", []Op{put("a", "x", 1), put("a", "y", 2), final("a", "y", 2)}, ""},
		{"older value read back", []Op{put("a", "x", 1), put("a", "y", 2), final("a", "x", 1)}, "acknowledged version 2"},
		{"same version, other value", []Op{put("a", "x", 1), final("a", "z", 1)}, `acknowledged as "x"`},
		{"unknown write may win", []Op{put("a", "x", 1), failed(put("a", "y", 0)), final("a", "y", 2)}, ""},
		{"cas not swapped is no write", []Op{{Kind: CAS, Key: "a", Value: "x", Version: 0}, final("a", "", 0)}, ""},
		{"never written", []Op{final("a", "", 0)}, ""},
		{"no final read", []Op{put("a", "x", 1)}, "no final read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := History{Ops: tc.ops, keys: []string{"a"}}.LostWrites()
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("LostWrites = %v, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("LostWrites = %v, want one line with %q", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	kv := kvclient.New(nil) // never called: Validate only looks at the fields
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"no KV", Config{}, false},
		{"defaults", Config{KV: kv}, true},
		{"shares over 1", Config{KV: kv, Reads: 0.8, CASes: 0.5}, false},
		{"negative clients", Config{KV: kv, Clients: -1}, false},
		{"negative share", Config{KV: kv, Reads: -0.1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
