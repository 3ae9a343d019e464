package node

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/slotd/slotd/slots"
)

// nopStore keeps nothing: the request-path benchmark measures the library.
type nopStore struct{}

func (nopStore) Scan(context.Context, slots.Slot, []byte, int) ([]Entry, []byte, error) {
	return nil, nil, nil
}
func (nopStore) Apply(context.Context, slots.Slot, []Mutation) error { return nil }
func (nopStore) DeleteSlot(context.Context, slots.Slot, int) (bool, error) {
	return true, nil
}
func (nopStore) SlotSize(context.Context, slots.Slot) (int64, int64, error) { return 0, 0, nil }

// BenchmarkRequestPath is what the library adds to one served read
// (CheckRead) and one write (Write with a store that does nothing), over
// 1,024 keys in as many slots, one goroutine. Measure it with
//
//	go test -c -o /tmp/node.test ./node
//	/usr/bin/time /tmp/node.test -test.run '^$' -test.bench 'RequestPath/(leased-)?(read|write)$' -test.cpu 1 -test.benchtime 6000000x
func BenchmarkRequestPath(b *testing.B) {
	lease := NewLease("a", nil, slog.New(slog.DiscardHandler))
	lease.Renewed(1, time.Now(), time.Hour, time.Minute)
	// "read" and "write" without a lease, as before leases existed;
	// "leased-read" and "leased-write" with one, as slotkv runs in a
	// cluster: the difference is the lease check.
	for _, c := range []struct {
		prefix string
		lease  *Lease
	}{{"", nil}, {"leased-", lease}} {
		benchRequestPath(b, c.prefix, c.lease)
	}
}

func benchRequestPath(b *testing.B, prefix string, lease *Lease) {
	m := new(StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	n, err := New(Config{ID: "a", Store: nopStore{}, Map: m, StateDir: b.TempDir(), NoSync: true, Lease: lease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%08d", i)
	}
	muts := make([][]Mutation, len(keys))
	for i, k := range keys {
		muts[i] = []Mutation{{Key: k, Value: []byte("v")}}
	}
	ctx := context.Background()
	b.Run(prefix+"read", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := n.CheckRead(keys[i&1023]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(prefix+"write", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			batch := muts[i&1023]
			if err := n.Write(ctx, batch[0].Key, func() ([]Mutation, error) { return batch, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
