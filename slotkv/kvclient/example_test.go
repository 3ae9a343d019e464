package kvclient_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slotkv/kvtest"
)

// Example writes, reads and deletes a key on real slotkv stores, routed by
// the SDK's map from a real slotd (all in this process, via slotkv/kvtest).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := kvtest.Start(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	sdk, err := client.New(ctx, client.Options{Endpoints: []string{cluster.Slotd}})
	if err != nil {
		log.Fatal(err)
	}
	defer sdk.Close()
	kv := kvclient.New(sdk)
	defer kv.Close()

	key := []byte("{user:42}:name")
	route, _ := sdk.Route(key)
	fmt.Println("slot", route.Slot.Int(), "owned by", route.Owner())

	ver, err := kv.Put(ctx, key, []byte("Ada"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("put: version", ver)
	if _, err := kv.Put(ctx, key, []byte("Ada Lovelace")); err != nil {
		log.Fatal(err)
	}
	val, ver, found, err := kv.Get(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("get: %q version %d found %v\n", val, ver, found)
	swapped, ver, err := kv.CompareAndSet(ctx, key, 1, []byte("stale"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cas at version 1: swapped", swapped, "version", ver)
	deleted, err := kv.Delete(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	_, _, found, err = kv.Get(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delete:", deleted, "then found", found)
	// Output:
	// slot 4546 owned by n2
	// put: version 1
	// get: "Ada Lovelace" version 2 found true
	// cas at version 1: swapped false version 2
	// delete: true then found false
}
