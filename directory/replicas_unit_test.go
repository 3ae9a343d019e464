package directory

import (
	"errors"
	"slices"
	"testing"
)

func TestReplicaChunkRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		sets map[int]*replicaRec
	}{
		{"empty", nil},
		{"first and last slot", map[int]*replicaRec{
			0:   {epoch: 0, isr: []uint16{3, 1, 2}},
			255: {epoch: 1 << 40, isr: []uint16{7}, learners: []uint16{300, 65534}},
		}},
		{"learners only beside the primary", map[int]*replicaRec{17: {epoch: 9, isr: []uint16{0}, learners: []uint16{4}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c *replicaChunk
			if len(tc.sets) > 0 {
				c = new(replicaChunk)
				for off, r := range tc.sets {
					c[off] = r
				}
			}
			b := encodeReplicas(c)
			if c == nil {
				if b != nil {
					t.Fatalf("an empty chunk encodes to %x, want nothing (the key is deleted)", b)
				}
				return
			}
			got, err := decodeReplicas(b)
			if err != nil {
				t.Fatal(err)
			}
			if !sameChunk(got, c) {
				t.Fatalf("round trip: %v, want %v", got, c)
			}
		})
	}
}

func TestDecodeReplicasRefusesMalformed(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
	}{
		{"truncated epoch", []byte{5}},
		{"truncated list", []byte{5, 1, 2, 1}},
		{"no primary", []byte{5, 1, 0, 0}},
		{"offsets out of order", []byte{5, 1, 1, 1, 0, 4, 1, 1, 1, 0}},
		{"offset twice", []byte{5, 1, 1, 1, 0, 5, 1, 1, 1, 0}},
		{"list too long", []byte{5, 1, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0}},
		{"index past the table", []byte{5, 1, 1, 0xff, 0xff, 0x03, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeReplicas(tc.b); !errors.Is(err, errReplicaChunk) {
				t.Fatalf("decode %x: %v, want errReplicaChunk", tc.b, err)
			}
		})
	}
}

func TestReplicaKeysParse(t *testing.T) {
	k := keys{"/p/"}
	cases := []struct {
		key   string
		kind  keyKind
		chunk int
	}{
		{k.replicas(0), kindReplicas, 0},
		{k.replicas(63), kindReplicas, 63},
		{"/p/replicas/64", kindOther, 0},
		{"/p/replicas/x", kindOther, 0},
		{k.replication(), kindReplication, 0},
		{"/p/replicationx", kindOther, 0},
	}
	for _, tc := range cases {
		kind, chunk, _, _ := k.parse(tc.key)
		if kind != tc.kind || chunk != tc.chunk {
			t.Errorf("parse(%q) = %v chunk %d, want %v chunk %d", tc.key, kind, chunk, tc.kind, tc.chunk)
		}
	}
}

func TestActiveZones(t *testing.T) {
	cases := []struct {
		name        string
		nodes       []Node
		zones, bare []string
	}{
		{"none", nil, nil, nil},
		{"zones counted once, sorted", []Node{{ID: "a", Zone: "z2", State: NodeActive}, {ID: "b", Zone: "z1", State: NodeActive}, {ID: "c", Zone: "z2", State: NodeActive}},
			[]string{"z1", "z2"}, nil},
		{"only active nodes count", []Node{{ID: "a", Zone: "z1", State: NodeDraining}, {ID: "b", State: NodeDown}, {ID: "c", Zone: "z3", State: NodeActive}},
			[]string{"z3"}, nil},
		{"active nodes without a zone", []Node{{ID: "y", State: NodeActive}, {ID: "x", State: NodeActive}}, nil, []string{"x", "y"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			zones, bare := ActiveZones(tc.nodes)
			if !slices.Equal(zones, tc.zones) || !slices.Equal(bare, tc.bare) {
				t.Fatalf("ActiveZones = %v, %v; want %v, %v", zones, bare, tc.zones, tc.bare)
			}
		})
	}
}
