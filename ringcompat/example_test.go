package ringcompat_test

import (
	"encoding/binary"
	"fmt"

	"github.com/slotd/slotd/ringcompat"
)

func Example() {
	r, err := ringcompat.New(ringcompat.Config{}, // xxhash, 128 points per unit of weight
		ringcompat.Node{ID: "cache-1", Weight: 1, Zone: "a"},
		ringcompat.Node{ID: "cache-2", Weight: 1, Zone: "a"},
		ringcompat.Node{ID: "cache-3", Weight: 2, Zone: "b"},
	)
	if err != nil {
		panic(err)
	}
	h := ringcompat.NewHolder(r)
	owner, _ := h.Load().LookupString("user:1042")
	fmt.Println(owner, h.Load().ReplicasString("user:1042", 2))

	// A change builds a new ring; lookups keep using the old one until the swap.
	if _, err := h.Update(func(r *ringcompat.Ring) (*ringcompat.Ring, error) {
		return r.Remove("cache-3")
	}); err != nil {
		panic(err)
	}
	owner, _ = h.Load().LookupString("user:1042")
	fmt.Println(owner)
	// Output:
	// cache-3 [cache-3 cache-2]
	// cache-2
}

// The reference ring (Seed000): node ids are decimal uint32s, and one point
// per unit of weight gives each node exactly Weight points.
func Example_seed000() {
	var nodes []ringcompat.Node
	for i := range 10 {
		nodes = append(nodes, ringcompat.Node{ID: fmt.Sprint(i), Weight: 100})
	}
	r, err := ringcompat.New(ringcompat.Config{Hash: ringcompat.Seed000, VNodes: 1}, nodes...)
	if err != nil {
		panic(err)
	}
	owner, _ := r.LookupString("user:0")
	fmt.Println(owner, r.ReplicasString("user:0", 3))
	// Output: 2 [2 9 7]
}

// A custom point hash, here placing a key at its first 8 bytes read as a
// big-endian number, and node points at multiples of a per-node stride.
func ExampleCustomHash() {
	key := func(b []byte) uint64 {
		var buf [8]byte
		copy(buf[:], b)
		return binary.BigEndian.Uint64(buf[:])
	}
	point := func(id string, i int) uint64 { return uint64(id[0]-'a'+1) << 60 * uint64(i+1) }
	r, err := ringcompat.New(ringcompat.Config{Hash: ringcompat.CustomHash("demo", key, point), VNodes: 1},
		ringcompat.Node{ID: "a", Weight: 1}, // point 1<<60
		ringcompat.Node{ID: "b", Weight: 1}, // point 2<<60
	)
	if err != nil {
		panic(err)
	}
	// 0x20... sits exactly on b's point: the successor is the first point at
	// or after a key, so b owns it; past b the ring wraps to a.
	for _, k := range []string{"\x00", "\x11", "\x20", "\x21"} {
		owner, _ := r.LookupString(k)
		fmt.Printf("%x -> %s\n", k, owner)
	}
	// Output:
	// 00 -> a
	// 11 -> b
	// 20 -> b
	// 21 -> a
}
