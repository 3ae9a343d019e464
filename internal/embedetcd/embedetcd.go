package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// ErrNotReady is returned when the member does not become ready in time.
var ErrNotReady = errors.New("embedetcd: member not ready")

// Config describes one member.
type Config struct {
	// Name of the member; default "slotd".
	Name string
	// DataDir holds the WAL and the backend. Required.
	DataDir string
	// ClientURL is where clients connect; default http://127.0.0.1:7479.
	ClientURL string
	// PeerURL is where other members connect; default http://127.0.0.1:7480.
	PeerURL string
	// InitialCluster is "name=peerURL,..." for a multi-member cluster;
	// default: this member alone.
	InitialCluster string
	// ClusterToken tells clusters apart; default "slotd".
	ClusterToken string
	// ReadyTimeout bounds the wait for the member to serve; default 60s
	// (a member of a new multi-member cluster waits for a quorum).
	ReadyTimeout time.Duration
	// Logger receives the member's errors; etcd's own info logs are dropped.
	Logger *slog.Logger
	// NoFsync skips fsync (tests only: a crash may lose acknowledged writes).
	NoFsync bool
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "slotd"
	}
	if c.ClientURL == "" {
		c.ClientURL = "http://127.0.0.1:7479"
	}
	if c.PeerURL == "" {
		c.PeerURL = "http://127.0.0.1:7480"
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
	for _, u := range []string{c.ClientURL, c.PeerURL} {
		if u == "" {
			continue
		}
		if _, err := url.Parse(u); err != nil {
			return fmt.Errorf("embedetcd: bad URL %q: %w", u, err)
		}
	}
	return nil
}

// Server is a running member.
type Server struct {
	etcd *embed.Etcd
	cfg  Config
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
	ec.UnsafeNoFsync = cfg.NoFsync
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
	cfg.Logger.Info("etcd member ready", "name", cfg.Name, "client_url", cfg.ClientURL, "data_dir", cfg.DataDir)
	return &Server{etcd: e, cfg: cfg}, nil
}

// Endpoints returns the client URLs to give clientv3.
func (s *Server) Endpoints() []string { return []string{s.cfg.ClientURL} }

// Err reports a fatal error of the running member.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member: it stops accepting, ends client streams and
// closes the backend. Safe to call once.
func (s *Server) Close() { s.etcd.Close() }
