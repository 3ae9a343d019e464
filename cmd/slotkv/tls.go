package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/slotkv"
	"github.com/slotd/slotd/tlsconf"
)

// tlsOptions are the TLS and authorization flags of `slotkv` (serve): its
// own listeners (the names slotd uses), and its connection to slotd.
type tlsOptions struct {
	cert, key, ca, clientAuth, tokenFile      string
	slotdCA, slotdCert, slotdKey, slotdTokens string
}

func (o *tlsOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.cert, "tls-cert", "", "certificate (PEM) of the gRPC and HTTP listeners; enables TLS")
	f.StringVar(&o.key, "tls-key", "", "private key (PEM) for --tls-cert")
	f.StringVar(&o.ca, "tls-ca", "", "CA (PEM) that verifies client certificates (roles: store for slotd's mover, read for KV clients); also the default --slotd-tls-ca")
	f.StringVar(&o.clientAuth, "client-auth", "", "client certificates: none, request or require (default: request with --tls-ca, else none)")
	f.StringVar(&o.tokenFile, "token-file", "", `bearer tokens, one "token role[,role] [name]" a line; needs TLS`)
	f.StringVar(&o.slotdCA, "slotd-tls-ca", "", "CA (PEM) that verifies slotd; TLS to slotd is on when this (or --tls-ca) or --slotd-tls-cert is set")
	f.StringVar(&o.slotdCert, "slotd-tls-cert", "", "client certificate (PEM) presented to slotd: roles store (register, heartbeat) and read (watch the map)")
	f.StringVar(&o.slotdKey, "slotd-tls-key", "", "private key (PEM) for --slotd-tls-cert")
	f.StringVar(&o.slotdTokens, "slotd-token-file", "", "file whose first token (roles store and read) is sent to slotd; needs TLS to slotd")
}

func (o *tlsOptions) validate() error {
	switch {
	case (o.cert == "") != (o.key == ""):
		return usageError{errors.New("--tls-cert and --tls-key go together")}
	case o.cert == "" && (o.clientAuth != "" || o.tokenFile != ""):
		return usageError{errors.New("--client-auth and --token-file need --tls-cert and --tls-key: certificates and tokens must not cross plaintext")}
	case (o.slotdCert == "") != (o.slotdKey == ""):
		return usageError{errors.New("--slotd-tls-cert and --slotd-tls-key go together")}
	case o.slotdTokens != "" && !o.slotdTLS():
		return usageError{errors.New("--slotd-token-file needs TLS to slotd (--slotd-tls-ca or --tls-ca): a bearer token must not cross plaintext")}
	}
	return nil
}

// slotdTLS reports whether slotkv dials slotd over TLS.
func (o *tlsOptions) slotdTLS() bool {
	return o.slotdCA != "" || o.ca != "" || o.slotdCert != ""
}

// listener loads the listeners' TLS files (nil when TLS is off) and builds
// the authorizer for slotkv.Policy. Authorization is on when client
// certificates are verified or a token file is given.
func (o *tlsOptions) listener(lg *slog.Logger, reg prometheus.Registerer) (*tlsconf.Server, *auth.Authorizer, error) {
	cfg := tlsconf.Config{CertFile: o.cert, KeyFile: o.key, CAFile: o.ca, ClientAuth: tlsconf.ClientAuth(o.clientAuth), Logger: lg}
	var ts *tlsconf.Server
	if o.cert != "" {
		var err error
		if ts, err = tlsconf.NewServer(cfg); err != nil {
			return nil, nil, err
		}
	}
	az, err := auth.New(auth.Config{
		Policy: slotkv.Policy(), ClientCerts: ts != nil && cfg.VerifiesClientCerts(),
		TokenFile: o.tokenFile, Logger: lg, Registerer: reg,
	})
	if err != nil {
		return nil, nil, err
	}
	return ts, az, nil
}

// serverOptions puts authorization first, so a refused call runs nothing
// (not even the request metrics), then the node's own options, request
// limits and the TLS credentials.
func serverOptions(ts *tlsconf.Server, az *auth.Authorizer, node []grpc.ServerOption) []grpc.ServerOption {
	opts := append(az.ServerOptions(), node...)
	opts = append(opts, auth.Limits{}.ServerOptions()...)
	if ts != nil {
		opts = append(opts, grpc.Creds(ts.Credentials()))
	}
	return opts
}

// slotdDialOptions are how slotkv reaches slotd (registration, heartbeats
// and the map watch): TLS with the store certificate or token when
// configured, else plaintext.
func (o *tlsOptions) slotdDialOptions(lg *slog.Logger) ([]grpc.DialOption, error) {
	if !o.slotdTLS() {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	ca := o.slotdCA
	if ca == "" {
		ca = o.ca
	}
	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: o.slotdCert, KeyFile: o.slotdKey, CAFile: ca, Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("TLS to slotd: %w", err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(tc.Credentials())}
	if o.slotdTokens != "" {
		tok, err := auth.NewTokenCredentials(o.slotdTokens, false)
		if err != nil {
			return nil, fmt.Errorf("--slotd-token-file: %w", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(tok))
	}
	return opts, nil
}

// warnIfOpen logs when anyone who reaches a non-loopback listener may call
// everything, the Store protocol included (fence, drop a slot).
func warnIfOpen(lg *slog.Logger, az *auth.Authorizer, lis net.Listener) {
	if az.Enabled() {
		return
	}
	if host, _, err := net.SplitHostPort(lis.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			lg.Warn("authorization is off and slotkv listens beyond loopback: anyone who reaches it can read, write, fence or drop slots; give --tls-ca (client certificates) or --token-file", "listen", lis.Addr().String())
		}
	}
}
