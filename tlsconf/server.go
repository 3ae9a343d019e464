package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"google.golang.org/grpc/credentials"
)

// Server holds a listener's TLS files and hands out configurations that
// always use the newest good set. Safe for concurrent use.
type Server struct {
	l        *loader
	authType tls.ClientAuthType
}

// NewServer loads the files named by cfg, which must include a certificate
// and key. It fails with a one-line error naming the bad file.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CertFile == "" {
		return nil, fmt.Errorf("%w: a server needs a cert file and a key file", ErrInvalid)
	}
	cfg.setDefaults()
	l, err := newLoader(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{l: l}
	switch cfg.clientAuth() {
	case ClientAuthNone:
		s.authType = tls.NoClientCert
	case ClientAuthRequest:
		// Verified when given: an unverified certificate must never reach
		// authorization, which reads roles from it.
		s.authType = tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		s.authType = tls.RequireAndVerifyClientCert
	}
	return s, nil
}

// TLSConfig returns a configuration for any TLS listener (gRPC, HTTP):
// every handshake picks up the current files through GetConfigForClient.
// For net/http use http.Server{TLSConfig: s.TLSConfig()} with
// ServeTLS(ln, "", "").
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.configFor(s.l.get()), nil
		},
	}
}

func (s *Server) configFor(m *material) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*m.cert},
		ClientAuth:   s.authType,
		ClientCAs:    m.pool,
		// h2 for gRPC (which refuses a connection without ALPN), http/1.1
		// for the metrics and debug listener.
		NextProtos: []string{"h2", "http/1.1"},
	}
}

// Credentials returns gRPC server credentials: grpc.NewServer(grpc.Creds(s.Credentials())).
func (s *Server) Credentials() credentials.TransportCredentials {
	return credentials.NewTLS(s.TLSConfig())
}

// Reload re-reads the files now (for example on SIGHUP) instead of waiting
// for the next handshake after ReloadInterval. On error the previous files
// stay in use.
func (s *Server) Reload() error { return s.l.reload() }

// Certificate returns the leaf certificate in use, e.g. to export its expiry.
func (s *Server) Certificate() *x509.Certificate { return s.l.get().cert.Leaf }
