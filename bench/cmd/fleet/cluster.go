package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// cluster is etcd and slotd as two processes: etcd alone (`slotd etcd`, the
// member slotd embeds by default, with the same settings), so that slotd's
// CPU and memory are its own, and slotd at its defaults over it.
type cluster struct {
	etcd, slotd *child
	dir0, bin   string   // where the logs go, where slotd is
	slotdArgs   []string // slotd's flags, for a restart
	etcdURL     string   // http://host:port, also its /metrics
	slotdAddr   string   // gRPC
	slotdHTTP   string   // /metrics
	conn        *grpc.ClientConn
	admin       slotdv1.AdminClient
	cli         *clientv3.Client
	dir         *directory.Directory
}

// startCluster starts etcd with its data in dir and slotd over it, both
// logging to dir.
func startCluster(ctx context.Context, bin, dir string) (_ *cluster, err error) {
	pp, err := ports(4)
	if err != nil {
		return nil, err
	}
	c := &cluster{
		etcdURL:   fmt.Sprintf("http://127.0.0.1:%d", pp[0]),
		slotdAddr: fmt.Sprintf("127.0.0.1:%d", pp[2]),
		slotdHTTP: fmt.Sprintf("127.0.0.1:%d", pp[3]),
		dir0:      dir,
		bin:       bin,
	}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	c.etcd, err = startChild(dir, "etcd", filepath.Join(bin, "slotd"), "etcd", "--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--client-url", c.etcdURL, "--peer-url", fmt.Sprintf("127.0.0.1:%d", pp[1]), "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.etcd, c.etcdURL+"/health", time.Minute); err != nil {
		return nil, err
	}
	c.slotdArgs = []string{"--etcd-endpoints", c.etcdURL, "--listen", c.slotdAddr, "--http", c.slotdHTTP, "--log-level", "warn"}
	if err := c.startSlotd(ctx, "slotd"); err != nil {
		return nil, err
	}
	if c.conn, err = grpc.NewClient(c.slotdAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, fmt.Errorf("dial slotd: %w", err)
	}
	c.admin = slotdv1.NewAdminClient(c.conn)
	// The moves are written straight into the directory, as the mover's
	// leader would write them, on an etcd client of their own.
	if c.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{c.etcdURL}, DialTimeout: 10 * time.Second}); err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	if c.dir, err = directory.New(directory.Config{Client: c.cli}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cluster) startSlotd(ctx context.Context, name string) error {
	var err error
	if c.slotd, err = startChild(c.dir0, name, filepath.Join(c.bin, "slotd"), c.slotdArgs...); err != nil {
		return err
	}
	return waitHTTP(ctx, c.slotd, "http://"+c.slotdHTTP+"/healthz", time.Minute)
}

// takeMover stops slotd, makes this process the mover's leader, and
// starts slotd again on the same ports: slotd then serves as a follower
// (its API, its watch hub) while this process writes the moves, as the
// leader's executor would. A leading slotd would abort the moves, which
// belong to no plan.
// lost is closed if the lead is lost; calling resign gives it up.
func (c *cluster) takeMover(ctx context.Context) (lost <-chan struct{}, resign func(), err error) {
	c.slotd.stop()
	// A longer lease than slotd's 5 s: this process is busy with the
	// nodes, and losing the lead would let slotd abort the moves.
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(60))
	if err != nil {
		return nil, nil, fmt.Errorf("etcd session: %w", err)
	}
	el := concurrency.NewElection(sess, c.dir.LeaderElectionPrefix())
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := el.Campaign(cctx, "fleet"); err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("campaign for the mover's leadership: %w", err)
	}
	resign = func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = el.Resign(rctx)
		sess.Close()
	}
	if err := c.startSlotd(ctx, "slotd-follower"); err != nil {
		resign()
		return nil, nil, err
	}
	return sess.Done(), resign, nil
}

// stop stops slotd, then etcd. Safe on a partly started cluster.
func (c *cluster) stop() {
	if c.conn != nil {
		c.conn.Close()
	}
	if c.cli != nil {
		c.cli.Close()
	}
	if c.slotd != nil {
		c.slotd.stop()
	}
	if c.etcd != nil {
		c.etcd.stop()
	}
}

// alive reports an error when etcd or slotd has exited.
func (c *cluster) alive() error { return errors.Join(c.etcd.exited(), c.slotd.exited()) }
