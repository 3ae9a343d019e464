// Package kvpb holds the protobuf messages and gRPC stubs of slotkv's client
// API (kv.proto). Regenerate with `go generate ./slotkv/kvpb` after `make tools`.
//
// Usage:
//
//	kv := kvpb.NewKVClient(conn)
//	put, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
//	_, err = kv.CompareAndSet(ctx, &kvpb.CompareAndSetRequest{Key: []byte("k"), ExpectedVersion: put.Version, Value: []byte("v2")})
package kvpb

//go:generate sh -c "cd ../.. && make proto"
