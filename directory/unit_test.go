package directory

import (
	"errors"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
)

func TestKeysParse(t *testing.T) {
	k := keys{"/p/"}
	cases := []struct {
		key   string
		kind  keyKind
		chunk int
		id    string
		slot  uint16
	}{
		{k.schema(), kindSchema, 0, "", 0},
		{k.version(), kindVersion, 0, "", 0},
		{k.chunk(0), kindChunk, 0, "", 0},
		{k.chunk(63), kindChunk, 63, "", 0},
		{"/p/owners/64", kindOther, 0, "", 0},
		{"/p/owners/x", kindOther, 0, "", 0},
		{k.node("n-1"), kindNode, 0, "n-1", 0},
		{k.move(16383), kindMove, 0, "", 16383},
		{"/p/moves/16384", kindOther, 0, "", 0},
		{k.history(7), kindOther, 0, "", 0},
		{k.alive("n1"), kindOther, 0, "", 0},
		{k.throttle(), kindOther, 0, "", 0},
		{"/q/version", kindOther, 0, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			kind, chunk, id, slot := k.parse(tc.key)
			if kind != tc.kind || chunk != tc.chunk || id != tc.id || slot != tc.slot {
				t.Fatalf("parse = %v %d %q %d, want %v %d %q %d", kind, chunk, id, slot, tc.kind, tc.chunk, tc.id, tc.slot)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cli := etcdtest.New(t).Client()
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Client: cli}, true},
		{"no client", Config{}, false},
		{"prefix without slash", Config{Client: cli, Prefix: "/slotd"}, false},
		{"prefix with an empty segment", Config{Client: cli, Prefix: "/a//"}, false},
		{"negative history", Config{Client: cli, HistoryLimit: -1}, false},
		{"negative timeout", Config{Client: cli, RequestTimeout: -1}, false},
		{"negative attempts", Config{Client: cli, UpdateAttempts: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want ErrInvalid", err)
			}
			if _, err := New(tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("New() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCheckID(t *testing.T) {
	cases := []struct {
		id string
		ok bool
	}{
		{"n1", true},
		{"node-1.zone_a", true},
		{"10.0.0.1:7000", false},
		{"", false},
		{"-leading", false},
		{"a/b", false},
		{"a b", false},
		{"é", false},
		{string(make([]byte, 65)), false},
	}
	for _, tc := range cases {
		if err := checkID("id", tc.id); (err == nil) != tc.ok {
			t.Errorf("checkID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
