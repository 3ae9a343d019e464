package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/maptest"
)

// A client routes a key locally, and Do follows a MOVED answer from a store
// whose slot has just moved.
func ExampleClient_Do() {
	m, _ := maptest.RoundRobin(7, []slotmap.Node{
		{ID: "a", Addr: "10.0.0.1:7500"}, {ID: "b", Addr: "10.0.0.2:7500"},
	})
	srv, _ := maptest.Start(maptest.NewState(m), "127.0.0.1:0")
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{Endpoints: []string{srv.Addr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	key := "{user:42}:cart"
	r, _ := c.RouteString(key)
	fmt.Println("slot", r.Slot, "owner", r.Owner(), "at version", r.Version)

	// The store at the old owner answers MOVED (version 8 is newer than the
	// client's map), the new owner answers.
	err = c.DoString(ctx, key, func(ctx context.Context, addr string, asking bool) error {
		fmt.Println("request to", addr, "asking", asking)
		if addr == r.Addr() {
			return redirect.Redirect{Kind: redirect.Moved, Slot: r.Slot, Owner: "b", Addr: "10.0.0.2:7500", Version: 8}.Err()
		}
		return nil
	})
	fmt.Println("err", err)
	r, _ = c.RouteString(key)
	fmt.Println("owner now", r.Owner())
	// Output:
	// slot 4546 owner a at version 7
	// request to 10.0.0.1:7500 asking false
	// request to 10.0.0.2:7500 asking false
	// err <nil>
	// owner now b
}
