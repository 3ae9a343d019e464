package auth

import (
	"context"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// AuthorizeHTTP is Authorize for an HTTP request on slotd's HTTP port (the
// web console's JSON): the same identities (the verified client
// certificate of the TLS connection, an "Authorization: Bearer" header
// checked against the token file) and the same policy, looked up as if r
// called the gRPC method fullMethod. The error is a gRPC status error;
// HTTPStatus gives its HTTP code.
func (a *Authorizer) AuthorizeHTTP(r *http.Request, fullMethod string) (context.Context, error) {
	ctx := r.Context()
	if r.TLS != nil {
		addr, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
		var pa net.Addr = addr
		if addr == nil {
			pa = &net.TCPAddr{}
		}
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: pa, AuthInfo: credentials.TLSInfo{State: *r.TLS}})
	}
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.MD{"authorization": h})
	}
	return a.Authorize(ctx, fullMethod)
}

// HTTPStatus maps an error of Authorize to an HTTP status code: 401 for a
// caller without identity, 403 for one without the role, 500 otherwise.
func HTTPStatus(err error) int {
	switch status.Code(err) {
	case codes.OK:
		return http.StatusOK
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	default:
		return http.StatusInternalServerError
	}
}
