package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// Client holds a client's TLS files (CA and, for mutual TLS, its own
// certificate) and hands out configurations that use the newest good set.
// Safe for concurrent use.
type Client struct {
	l          *loader
	serverName string
}

// NewClient loads the files named by cfg. With no CAFile the server is
// verified against the system roots; with no CertFile no client
// certificate is sent.
func NewClient(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	l, err := newLoader(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{l: l, serverName: cfg.ServerName}, nil
}

// TLSConfig returns a client configuration whose certificate is re-read on
// use. Its CA pool is the one loaded when TLSConfig is called: crypto/tls
// has no callback for roots, so for a CA that rotates while connected use
// Credentials (gRPC) or ConfigureEtcd, which build a fresh configuration per
// handshake.
func (c *Client) TLSConfig() *tls.Config {
	return c.configFor(c.l.get(), c.serverName)
}

func (c *Client) configFor(m *material, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    m.pool,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cur := c.l.get(); cur.cert != nil {
				return cur.cert, nil
			}
			// An empty certificate means "send none"; the server decides.
			return &tls.Certificate{}, nil
		},
	}
}

// Credentials returns gRPC client credentials that load the current files on
// every handshake: grpc.NewClient(target, grpc.WithTransportCredentials(c.Credentials())).
func (c *Client) Credentials() credentials.TransportCredentials {
	return &clientCreds{c: c, serverName: c.serverName}
}

// Reload re-reads the files now. On error the previous files stay in use.
func (c *Client) Reload() error { return c.l.reload() }

// Certificate returns the client certificate in use, or nil without one.
func (c *Client) Certificate() *x509.Certificate {
	if m := c.l.get(); m.cert != nil {
		return m.cert.Leaf
	}
	return nil
}

// clientCreds delegates each handshake to grpc's own TLS credentials built
// from the current files, so verification stays the standard library's
// (chain, hostname, ALPN) while the CA pool can change.
type clientCreds struct {
	c          *Client
	serverName string
}

var _ credentials.TransportCredentials = (*clientCreds)(nil)

func (cc *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(cc.c.configFor(cc.c.l.get(), cc.serverName)).ClientHandshake(ctx, authority, raw)
}

func (cc *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconf: client credentials cannot accept connections; use Server.Credentials")
}

// Info names the server: grpc.NewClient still reads the deprecated
// ServerName as the channel's authority (as credentials.NewTLS's Info does).
func (cc *clientCreds) Info() credentials.ProtocolInfo {
	//lint:ignore SA1019 grpc-go reads ServerName (clientconn.go) and fills SecurityVersion in its own TLS credentials
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2", ServerName: cc.serverName}
}

func (cc *clientCreds) Clone() credentials.TransportCredentials {
	cp := *cc
	return &cp
}

func (cc *clientCreds) OverrideServerName(name string) error {
	cc.serverName = name
	return nil
}
