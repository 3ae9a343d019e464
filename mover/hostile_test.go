package mover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// lyingStore is a real store client whose answers a test rewrites: the
// store is broken or hostile, and the mover must notice before it plants
// the lie on the target.
type lyingStore struct {
	slotdv1.StoreClient
	mu sync.Mutex // guards the rewrite funcs (each fires once) and fired
	// export rewrites one export batch (the first it accepts).
	export func(*slotdv1.ExportBatch) bool
	// changes rewrites one batch of changes (the first it accepts).
	changes func(*slotdv1.ChangeBatch) bool
	// imports rewrites one import request (the first it accepts).
	imports func(*slotdv1.ImportRequest) bool
	fired   bool
}

// fire runs rewrite once it has not fired yet and reports whether it did.
func (l *lyingStore) fire(rewrite func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.fired && rewrite() {
		l.fired = true
	}
}

func (l *lyingStore) didFire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fired
}

func (l *lyingStore) Export(ctx context.Context, in *slotdv1.ExportRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[slotdv1.ExportBatch], error) {
	s, err := l.StoreClient.Export(ctx, in, opts...)
	if err != nil || l.export == nil {
		return s, err
	}
	return &lyingStream[slotdv1.ExportBatch]{ServerStreamingClient: s, rewrite: func(b *slotdv1.ExportBatch) {
		l.fire(func() bool { return l.export(b) })
	}}, nil
}

func (l *lyingStore) Changes(ctx context.Context, in *slotdv1.ChangesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[slotdv1.ChangeBatch], error) {
	s, err := l.StoreClient.Changes(ctx, in, opts...)
	if err != nil || l.changes == nil {
		return s, err
	}
	return &lyingStream[slotdv1.ChangeBatch]{ServerStreamingClient: s, rewrite: func(b *slotdv1.ChangeBatch) {
		l.fire(func() bool { return l.changes(b) })
	}}, nil
}

func (l *lyingStore) Import(ctx context.Context, in *slotdv1.ImportRequest, opts ...grpc.CallOption) (*slotdv1.ImportResponse, error) {
	if l.imports != nil {
		l.fire(func() bool { return l.imports(in) })
	}
	return l.StoreClient.Import(ctx, in, opts...)
}

type lyingStream[T any] struct {
	grpc.ServerStreamingClient[T]
	rewrite func(*T)
}

func (s *lyingStream[T]) Recv() (*T, error) {
	m, err := s.ServerStreamingClient.Recv()
	if err == nil {
		s.rewrite(m)
	}
	return m, err
}

// TestStoreLiesAbortsMove runs a move whose source (or target) lies: a key
// of another slot in an export batch or in the changes, or a target that
// silently loses a key so the checksums differ after the drain. The
// transfer must fail with ErrStoreLied naming the slot and the bad key,
// not be retried, and abort cleanly: the source still owns the slot and
// serves every acknowledged write, the target holds nothing of the slot,
// and the foreign key was planted nowhere.
func TestStoreLiesAbortsMove(t *testing.T) {
	c := newCluster(t, 2)
	c.addNode("n3")
	// foreign is a key of some other slot, which the target owns nothing of.
	foreign := []byte("{planted}:key")
	cases := []struct {
		name string
		// lie installs the lie on the source or the target wrapper; keys
		// are the slot's keys.
		lie func(src, dst *lyingStore, keys [][]byte)
		// writeDuringCopy makes writes after the first snapshot batch, so
		// catch-up has changes to replay.
		writeDuringCopy bool
		// want are substrings the error must carry, beside the slot.
		want []string
	}{
		{
			name: "export batch carries a key of another slot",
			lie: func(src, _ *lyingStore, _ [][]byte) {
				src.export = func(b *slotdv1.ExportBatch) bool {
					if len(b.Entries) == 0 {
						return false
					}
					b.Entries = append(b.Entries, &slotdv1.Entry{Key: foreign, Value: []byte("evil")})
					return true
				}
			},
			want: []string{"export of slot", string(foreign), fmt.Sprintf("slot %d", slots.ForKey(foreign).Int())},
		},
		{
			name: "export batch key rewritten to another slot",
			lie: func(src, _ *lyingStore, _ [][]byte) {
				src.export = func(b *slotdv1.ExportBatch) bool {
					if len(b.Entries) < 2 {
						return false
					}
					b.Entries[1].Key = foreign
					return true
				}
			},
			want: []string{"export of slot", string(foreign)},
		},
		{
			name:            "changes carry a key of another slot",
			writeDuringCopy: true,
			lie: func(src, _ *lyingStore, _ [][]byte) {
				src.changes = func(b *slotdv1.ChangeBatch) bool {
					if len(b.Changes) == 0 {
						return false
					}
					last := b.Changes[len(b.Changes)-1]
					b.Changes = append(b.Changes, &slotdv1.Change{Seq: last.Seq + 1, Op: last.Op, Key: foreign, Value: []byte("evil")})
					return true
				}
			},
			want: []string{"changes of slot", string(foreign)},
		},
		{
			name: "target drops a key: checksums differ",
			lie: func(_, dst *lyingStore, _ [][]byte) {
				dst.imports = func(r *slotdv1.ImportRequest) bool {
					sn := r.GetSnapshot()
					if sn == nil || len(sn.Entries) == 0 {
						return false
					}
					sn.Entries = sn.Entries[1:]
					return true
				}
			},
			want: []string{"differs after drain", "source 200 keys", "target 199 keys"},
		},
	}
	// Each lie is told twice: to a transfer over wrapped clients, which
	// copies decoded batches, and over the StorePool's clients of proxies
	// that tell it on the wire, which the transfer relays as bytes.
	type run struct {
		path string
		tc   int
	}
	var runs []run
	for _, path := range []string{"decoded", "relayed"} {
		for i := range cases {
			runs = append(runs, run{path, i})
		}
	}
	for i, r := range runs {
		tc := cases[r.tc]
		t.Run(r.path+"/"+tc.name, func(t *testing.T) {
			snap, err := c.dir.Snapshot(c.ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A slot of n1, a different one per case, other than foreign's.
			slot := slots.MustNew(0)
			for s := i * 200; s < slots.Count; s++ {
				if snap.Owner(slots.MustNew(s)) == "n1" && s != slots.ForKey(foreign).Int() {
					slot = slots.MustNew(s)
					break
				}
			}
			keys := keysInSlots(map[int]bool{slot.Int(): true}, 200)
			acked := map[string][]byte{}
			for _, k := range keys {
				v := bytes.Repeat([]byte("v"), 256)
				if err := c.put(c.ctx, k, v); err != nil {
					t.Fatal(err)
				}
				acked[string(k)] = v
			}
			src, dst := c.nodes["n1"], c.nodes["n3"]
			srcReal, _ := c.pool.client(src.addr)
			dstReal, _ := c.pool.client(dst.addr)
			srcL, dstL := &lyingStore{StoreClient: srcReal}, &lyingStore{StoreClient: dstReal}
			tc.lie(srcL, dstL, keys)
			var srcC, dstC slotdv1.StoreClient = srcL, dstL
			if r.path == "relayed" {
				srcC, dstC = storeAt(t, c, serveLies(t, srcL)), storeAt(t, c, serveLies(t, dstL))
				if _, ok := srcC.(relayConn); !ok {
					t.Fatal("a StorePool client does not relay")
				}
			}
			mv, err := c.dir.BeginMove(c.ctx, directory.MoveSpec{Slot: slot, From: "n1", To: "n3", MoveID: fmt.Sprintf("hostile-%d", i), By: "test"})
			if err != nil {
				t.Fatal(err)
			}
			batches := 0
			tr := &slotTransfer{
				Slot: slot, MoveID: mv.MoveID, Source: srcC, Target: dstC, MaxBatchBytes: 8 << 10,
				Journal: &failJournal{dir: c.dir, mv: mv}, Verify: true, Fresh: true,
				Progress: func(int, int) {
					batches++
					if tc.writeDuringCopy && batches == 1 {
						// Captured: the next round of changes carries them.
						for _, k := range keys[:20] {
							v := []byte("changed")
							if err := c.put(c.ctx, k, v); err != nil {
								t.Error(err)
							}
							acked[string(k)] = v
						}
					}
				},
			}
			_, err = tr.Run(c.ctx, stepCopy)
			if !srcL.didFire() && !dstL.didFire() {
				t.Fatalf("the lie was never told (transfer: %v)", err)
			}
			if !errors.Is(err, ErrStoreLied) {
				t.Fatalf("transfer: %v, want ErrStoreLied", err)
			}
			if retryable(err) {
				t.Errorf("a lying store's error is retryable: %v", err)
			}
			msg := err.Error()
			for _, w := range append(tc.want, fmt.Sprintf("slot %d", slot.Int())) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}

			if targetErr, err := abortOnStores(c.ctx, slot, mv.MoveID, srcReal, dstReal); err != nil || targetErr != nil {
				t.Fatalf("abort: %v / target %v", err, targetErr)
			}
			if _, err := c.dir.AbortMove(c.ctx, slot, mv.MoveID, "store lied: "+msg, "test"); err != nil {
				t.Fatal(err)
			}
			after, err := c.dir.Snapshot(c.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if o := after.Owner(slot); o != "n1" {
				t.Fatalf("owner of slot %d after abort: %s, want n1", slot.Int(), o)
			}
			if o := after.Owner(slots.ForKey(foreign)); o == "n3" {
				t.Fatalf("foreign slot %d now owned by the target", slots.ForKey(foreign).Int())
			}
			for _, k := range keys {
				got, err := c.get(k)
				if err != nil {
					t.Fatalf("get %q after abort: %v", k, err)
				}
				if !bytes.Equal(got, acked[string(k)]) {
					t.Fatalf("get %q after abort = %q, want the acknowledged %q", k, got, acked[string(k)])
				}
			}
			if err := c.put(c.ctx, keys[0], []byte("after")); err != nil {
				t.Fatalf("write after abort: %v", err)
			}
			for _, s := range []slots.Slot{slot, slots.ForKey(foreign)} {
				waitfor.Err(c.t, 30*time.Second, "target holds nothing", func() error {
					sum, err := dstReal.Checksum(c.ctx, &slotdv1.ChecksumRequest{Slot: uint32(s.Int())})
					if err != nil {
						return err
					}
					if sum.Keys != 0 {
						return fmt.Errorf("target still holds %d keys of slot %d", sum.Keys, s.Int())
					}
					return nil
				})
			}
		})
	}
}
