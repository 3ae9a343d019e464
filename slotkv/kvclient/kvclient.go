package kvclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("kvclient: closed")

// Client sends KV requests to the owners the SDK routes to.
type Client struct {
	sdk  *client.Client
	dial []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool

	redirects atomic.Int64 // MOVED and ASK answers followed
	fenced    atomic.Int64 // FENCED answers waited out
}

// New returns a Client over sdk, dialing store nodes in plaintext plus any
// extra dial options. Closing the Client leaves sdk open.
func New(sdk *client.Client, dial ...grpc.DialOption) *Client {
	d := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)
	return &Client{sdk: sdk, dial: d, conns: map[string]*grpc.ClientConn{}}
}

// Redirects returns how many MOVED and ASK answers the Client has followed.
func (c *Client) Redirects() int64 { return c.redirects.Load() }

// Fenced returns how many FENCED answers the Client has waited out.
func (c *Client) Fenced() int64 { return c.fenced.Load() }

// kv returns a KV stub for the node at addr, dialing it once.
func (c *Client) kv(addr string) (kvpb.KVClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	conn, ok := c.conns[addr]
	if !ok {
		var err error
		if conn, err = grpc.NewClient(addr, c.dial...); err != nil {
			return nil, fmt.Errorf("kvclient: store %s: %w", addr, err)
		}
		c.conns[addr] = conn
	}
	return kvpb.NewKVClient(conn), nil
}

// Error is a failed call: which key, its slot, the owner the map named for
// it and the store the last attempt went to. It wraps the cause.
type Error struct {
	Op    string // "get", "put", "delete" or "cas"
	Key   []byte
	Slot  slots.Slot
	Owner string // the slot's owner in the client's map; "" without a map
	Store string // address of the store last tried; "" when none was reached
	Err   error
}

func (e *Error) Error() string {
	owner, store := e.Owner, e.Store
	if owner == "" {
		owner = "unknown"
	}
	if store == "" {
		store = "none"
	}
	return fmt.Sprintf("kvclient: %s %q (slot %d, owner %s, store %s): %v", e.Op, e.Key, e.Slot.Int(), owner, store, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// do runs call against key's owner through the SDK, counting redirects; a
// failure comes back as an *Error.
func (c *Client) do(ctx context.Context, op string, key []byte, call func(ctx context.Context, kv kvpb.KVClient) error) error {
	var tried string // the store of the last attempt
	err := c.sdk.Do(ctx, key, func(ctx context.Context, addr string, asking bool) error {
		tried = addr
		kv, err := c.kv(addr)
		if err != nil {
			return err
		}
		if asking {
			ctx = redirect.WithAsking(ctx)
		}
		err = call(ctx, kv)
		if _, ok := redirect.FromError(err); ok {
			c.redirects.Add(1)
		} else if _, ok := redirect.FencedFromError(err); ok {
			c.fenced.Add(1)
		}
		return err
	})
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Key: key, Slot: slots.ForKey(key), Store: tried, Err: err}
	if r, rerr := c.sdk.Route(key); rerr == nil {
		e.Owner = r.Owner()
	}
	return e
}

// Get returns key's value and version; found is false (and version 0) when
// the key does not exist.
func (c *Client) Get(ctx context.Context, key []byte) (value []byte, version uint64, found bool, err error) {
	err = c.do(ctx, "get", key, func(ctx context.Context, kv kvpb.KVClient) error {
		r, err := kv.Get(ctx, &kvpb.GetRequest{Key: key})
		if err == nil {
			value, version, found = r.GetValue(), r.GetVersion(), r.GetFound()
		}
		return err
	})
	return value, version, found, err
}

// Put stores value under key and returns the key's new version.
func (c *Client) Put(ctx context.Context, key, value []byte) (version uint64, err error) {
	err = c.do(ctx, "put", key, func(ctx context.Context, kv kvpb.KVClient) error {
		r, err := kv.Put(ctx, &kvpb.PutRequest{Key: key, Value: value})
		if err == nil {
			version = r.GetVersion()
		}
		return err
	})
	return version, err
}

// Delete removes key; deleted is false when it did not exist.
func (c *Client) Delete(ctx context.Context, key []byte) (deleted bool, err error) {
	err = c.do(ctx, "delete", key, func(ctx context.Context, kv kvpb.KVClient) error {
		r, err := kv.Delete(ctx, &kvpb.DeleteRequest{Key: key})
		if err == nil {
			deleted = r.GetDeleted()
		}
		return err
	})
	return deleted, err
}

// CompareAndSet stores value only if key's version is expected (0: the key
// must not exist). It returns whether it stored and the key's version now.
func (c *Client) CompareAndSet(ctx context.Context, key []byte, expected uint64, value []byte) (swapped bool, version uint64, err error) {
	err = c.do(ctx, "cas", key, func(ctx context.Context, kv kvpb.KVClient) error {
		r, err := kv.CompareAndSet(ctx, &kvpb.CompareAndSetRequest{Key: key, ExpectedVersion: expected, Value: value})
		if err == nil {
			swapped, version = r.GetSwapped(), r.GetVersion()
		}
		return err
	})
	return swapped, version, err
}

// Close closes the connections to store nodes. It is safe to call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for addr, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("kvclient: close %s: %w", addr, err))
		}
	}
	c.conns = nil
	return errors.Join(errs...)
}
