package node

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/slotd/slotd/slots"
)

// A store's write handler runs its write through Node.Write; a read handler
// asks CheckRead first. Errors go back to clients through StatusError.
func ExampleNode_Write() {
	dir, _ := os.MkdirTemp("", "node-example")
	defer os.RemoveAll(dir)
	owners := new(StaticMap)
	owners.SetAll("kv-1", "127.0.0.1:7500")
	owners.Set("kv-2", "127.0.0.1:7510", slots.ForString("{user:7}"))

	n, err := New(Config{ID: "kv-1", Store: newMemStore(), Map: owners, StateDir: dir})
	if err != nil {
		panic(err)
	}
	defer n.Close()
	ctx := context.Background()
	write := func(key, value string) error {
		return n.Write(ctx, []byte(key), func() ([]Mutation, error) {
			return []Mutation{{Key: []byte(key), Value: []byte(value)}}, nil
		})
	}
	fmt.Println(write("{user:42}:cart", "3 apples"))
	err = write("{user:7}:cart", "1 pear")
	fmt.Println(errors.Is(err, ErrMoved), StatusError(err))
	// Output:
	// <nil>
	// true rpc error: code = FailedPrecondition desc = MOVED 8271 127.0.0.1:7510 2
}
