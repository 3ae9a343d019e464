package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/slotd/slotd/tlsconf"
)

// ErrNotReady is returned when the member does not become ready in time.
var ErrNotReady = errors.New("embedetcd: member not ready")

// Config describes one member.
type Config struct {
	// Name of the member; default "slotd".
	Name string
	// DataDir holds the WAL and the backend. Required.
	DataDir string
	// ClientURL is where clients connect; default http://127.0.0.1:7479
	// (https:// with ClientTLS).
	ClientURL string
	// PeerURL is where other members connect; default http://127.0.0.1:7480
	// (https:// with PeerTLS).
	PeerURL string
	// ClientTLS, when it names files, makes the client listener serve TLS
	// (ClientURL must then be https://). With ClientAuth require (the
	// default whenever CAFile is set: etcd has no "request" mode, and a
	// client without a certificate would control the directory) only
	// clients with a certificate from CAFile get in. etcd re-reads the
	// files on every handshake, so rotation needs no restart.
	ClientTLS tlsconf.Config
	// PeerTLS is the same for the peer listener and for this member's
	// connections to its peers, whose certificate must therefore be usable
	// as a client certificate too (devca's server.pem is).
	PeerTLS tlsconf.Config
	// InitialCluster is "name=peerURL,..." for a multi-member cluster;
	// default: this member alone.
	InitialCluster string
	// ClusterToken tells clusters apart; default "slotd".
	ClusterToken string
	// ReadyTimeout bounds the wait for the member to serve; default 60s
	// (a member of a new multi-member cluster waits for a quorum).
	ReadyTimeout time.Duration
	// Logger receives the member's errors (etcd's info logs and warnings
	// are dropped), as slog lines with component=etcd.
	Logger *slog.Logger
	// NoFsync skips fsync (tests only: a crash may lose acknowledged writes).
	NoFsync bool
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "slotd"
	}
	if c.ClientURL == "" {
		c.ClientURL = scheme(c.ClientTLS) + "://127.0.0.1:7479"
	}
	if c.PeerURL == "" {
		c.PeerURL = scheme(c.PeerTLS) + "://127.0.0.1:7480"
	}
	if c.InitialCluster == "" {
		c.InitialCluster = c.Name + "=" + c.PeerURL
	}
	if c.ClusterToken == "" {
		c.ClusterToken = "slotd"
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports a configuration that cannot start.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("embedetcd: a data dir is required (--data-dir)")
	}
	for _, l := range []struct {
		what, url string
		tls       tlsconf.Config
	}{{"client", c.ClientURL, c.ClientTLS}, {"peer", c.PeerURL, c.PeerTLS}} {
		if l.tls.Enabled() {
			if err := l.tls.Validate(); err != nil {
				return fmt.Errorf("embedetcd: %s TLS: %w", l.what, err)
			}
			if l.tls.CertFile == "" {
				return fmt.Errorf("embedetcd: %s TLS needs a certificate and key to serve, not only a CA", l.what)
			}
		}
		if l.url == "" {
			continue
		}
		u, err := url.Parse(l.url)
		if err != nil {
			return fmt.Errorf("embedetcd: bad %s URL %q: %w", l.what, l.url, err)
		}
		if want := scheme(l.tls); u.Scheme != want {
			return fmt.Errorf("embedetcd: %s URL %q must be %s:// (TLS files given: %v)", l.what, l.url, want, l.tls.Enabled())
		}
	}
	return nil
}

// scheme is the URL scheme of a listener with these TLS files.
func scheme(c tlsconf.Config) string {
	if c.Enabled() {
		return "https"
	}
	return "http"
}

// serverTLSInfo is etcd's view of c. etcd has no "request" mode: with a
// CA and no explicit choice it requires client certificates.
func serverTLSInfo(c tlsconf.Config) transport.TLSInfo {
	if c.ClientAuth == "" && c.CAFile != "" {
		c.ClientAuth = tlsconf.ClientAuthRequire
	}
	return c.EtcdServerTLSInfo()
}

// Server is a running member.
type Server struct {
	etcd    *embed.Etcd
	cfg     Config
	closing atomic.Bool // set by Close: the listeners' errors are the shutdown
}

// Start starts the member and waits until it serves or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client URL: %w", err)
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: peer URL: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*cu}
	ec.AdvertiseClientUrls = []url.URL{*cu}
	ec.ListenPeerUrls = []url.URL{*pu}
	ec.AdvertisePeerUrls = []url.URL{*pu}
	ec.InitialCluster = cfg.InitialCluster
	ec.InitialClusterToken = cfg.ClusterToken
	ec.LogLevel = "error"
	srv := &Server{cfg: cfg}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newSlogLogger(cfg.Logger, &srv.closing))
	ec.UnsafeNoFsync = cfg.NoFsync
	if cfg.ClientTLS.Enabled() {
		ec.ClientTLSInfo = serverTLSInfo(cfg.ClientTLS)
	}
	if cfg.PeerTLS.Enabled() {
		ec.PeerTLSInfo = serverTLSInfo(cfg.PeerTLS)
	}
	// Keep an hour of revisions: watchers that fall behind further get a
	// fresh snapshot from the directory.
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1h"
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start member %s in %s: %w", cfg.Name, cfg.DataDir, err)
	}
	timer := time.NewTimer(cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: member %s failed: %w", cfg.Name, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("%w after %s (is a quorum of %s up?)", ErrNotReady, cfg.ReadyTimeout, cfg.InitialCluster)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	cfg.Logger.Info("etcd member ready", "name", cfg.Name, "client_url", cfg.ClientURL, "data_dir", cfg.DataDir,
		"client_tls", cfg.ClientTLS.Enabled(), "peer_tls", cfg.PeerTLS.Enabled())
	srv.etcd = e
	return srv, nil
}

// Endpoints returns the client URLs to give clientv3.
func (s *Server) Endpoints() []string { return []string{s.cfg.ClientURL} }

// Err reports a fatal error of the running member.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member: it stops accepting, ends client streams and
// closes the backend. Safe to call once.
func (s *Server) Close() {
	s.closing.Store(true)
	s.etcd.Close()
}
