package kvclient_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slotkv/kvtest"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestErrorNamesKeySlotOwnerAndStore: a call whose store cannot be reached
// fails with an *Error naming the key, its slot, the map's owner and the
// store tried, wrapping the gRPC status; a call that never reached a store
// names none.
func TestErrorNamesKeySlotOwnerAndStore(t *testing.T) {
	c := kvtest.New(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sdk, _ := c.KV(t)
	key := []byte("{user:42}:name")
	route, err := sdk.Route(key)
	if err != nil {
		t.Fatal(err)
	}

	// Every store connection fails to dial.
	broken := kvclient.New(sdk, grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
		return nil, errors.New("no route (test)")
	}))
	defer broken.Close()
	_, err = broken.Put(ctx, key, []byte("v"))
	var kerr *kvclient.Error
	if !errors.As(err, &kerr) {
		t.Fatalf("Put: %v (%T), want a *kvclient.Error", err, err)
	}
	if string(kerr.Key) != string(key) || kerr.Slot != slots.ForKey(key) || kerr.Op != "put" ||
		kerr.Owner != route.Owner() || kerr.Store != c.Stores[route.Owner()] {
		t.Errorf("Error = %+v; want key %q, slot %d, owner %s at %s", kerr, key, route.Slot.Int(), route.Owner(), c.Stores[route.Owner()])
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("status code %v, want the wrapped Unavailable", status.Code(err))
	}
	for _, want := range []string{`"{user:42}:name"`, "slot 4546", "owner " + route.Owner(), "store " + kerr.Store} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %s", err, want)
		}
	}

}

// TestErrorText: an *Error without an owner or a store says so, and
// unwraps to its cause.
func TestErrorText(t *testing.T) {
	e := &kvclient.Error{Op: "get", Key: []byte("k"), Slot: slots.ForKey([]byte("k")), Err: client.ErrNoMap}
	want := `kvclient: get "k" (slot ` + strconv.Itoa(slots.ForKey([]byte("k")).Int()) + `, owner unknown, store none): ` + client.ErrNoMap.Error()
	if e.Error() != want || !errors.Is(e, client.ErrNoMap) {
		t.Errorf("Error() = %q, want %q wrapping ErrNoMap", e.Error(), want)
	}
}

// TestDelete: Delete removes a key and reports whether it existed.
func TestDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, kv := kvtest.New(t, 1).KV(t)
	if _, err := kv.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if deleted, err := kv.Delete(ctx, []byte("k")); err != nil || deleted != want {
			t.Errorf("Delete #%d = %v, %v; want %v", i+1, deleted, err, want)
		}
	}
	if _, ver, found, err := kv.Get(ctx, []byte("k")); err != nil || found || ver != 0 {
		t.Errorf("Get after Delete: version %d found %v err %v", ver, found, err)
	}
}
