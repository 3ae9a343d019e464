// Package replicas dials a set of interchangeable slotd replicas as one
// gRPC channel.
//
// slotd keeps no state of its own, so any replica serves any call. The
// channel resolves to every address given and gRPC's default pick_first
// balancer uses the first that answers, moving to the next when it goes
// away. Each address keeps its own TLS server name, so replicas are
// verified by their own host names.
//
//	cc, err := replicas.Dial("slotctl", []string{"10.0.0.1:7400", "10.0.0.2:7400"}, creds)
package replicas

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// ErrBadEndpoint marks an address that is not host:port.
var ErrBadEndpoint = errors.New("replicas: endpoint is not host:port")

// Dial returns a channel over endpoints (host:port each); scheme names the
// resolver in gRPC's logs. It does not connect until the first call.
func Dial(scheme string, endpoints []string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoint given", ErrBadEndpoint)
	}
	addrs := make([]resolver.Address, len(endpoints))
	for i, ep := range endpoints {
		host, _, err := net.SplitHostPort(ep)
		if err != nil {
			return nil, fmt.Errorf("%w: %q (e.g. 127.0.0.1:7400)", ErrBadEndpoint, ep)
		}
		addrs[i] = resolver.Address{Addr: ep, ServerName: host}
	}
	r := manual.NewBuilderWithScheme(scheme)
	r.InitialState(resolver.State{Addresses: addrs})
	return grpc.NewClient(r.Scheme()+":///slotd", append(slices.Clip(opts), grpc.WithResolvers(r))...)
}
