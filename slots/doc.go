// Package slots maps keys to the 16,384 fixed slots of a slotd cluster and
// holds sets of slots.
//
// The slot function is a contract shared by every client, store and tool in
// every language:
//
//	slot(key) = xxhash64(seed 0, tagged(key)) mod 16384
//
// where tagged(key) is the part between the first '{' and the first '}' after
// it when that part is not empty (the Redis Cluster hash-tag rule), and the
// whole key otherwise. It must never change in place: a change would move
// almost every key. testdata/slots.tsv pins it.
//
// Usage:
//
//	s := slots.ForString("{user:42}:cart") // same slot as "{user:42}:profile"
//	var set slots.Set
//	set.Add(s)
//	fmt.Println(set.String()) // "4546"
//
//	set, err := slots.ParseSet("0-5460,5461,7000-7010")
package slots
