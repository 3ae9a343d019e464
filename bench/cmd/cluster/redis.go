package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCluster is Redis Cluster masters on 127.0.0.1, no persistence
// (Redis's default for a reshard benchmark: nothing is fsynced).
type redisCluster struct {
	ports []int
	ids   []string
}

func (r *redisCluster) addr(i int) string { return "127.0.0.1:" + strconv.Itoa(r.ports[i]) }

// startRedis starts n cluster-enabled masters; the first `create` of them
// form the cluster, the rest are added empty with add-node.
func startRedis(ctx context.Context, ps *procs, dir string, n, create int) (*redisCluster, error) {
	ports, err := freeRedisPorts(n)
	if err != nil {
		return nil, err
	}
	r := &redisCluster{ports: ports}
	for i, p := range ports {
		d := filepath.Join(dir, "redis-"+strconv.Itoa(p))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if _, err := ps.start(fmt.Sprintf("redis-%d", i+1), "redis-server", "--port", strconv.Itoa(p), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--dir", d,
			"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning"); err != nil {
			return nil, err
		}
	}
	for i := range ports {
		if err := poll(ctx, 20*time.Second, 50*time.Millisecond, "redis "+r.addr(i), func() error {
			_, err := run(ctx, "redis-cli", "-p", strconv.Itoa(r.ports[i]), "ping")
			return err
		}); err != nil {
			return nil, err
		}
		out, err := run(ctx, "redis-cli", "-p", strconv.Itoa(r.ports[i]), "cluster", "myid")
		if err != nil {
			return nil, err
		}
		r.ids = append(r.ids, strings.TrimSpace(out))
	}
	args := []string{"--cluster", "create"}
	for i := range create {
		args = append(args, r.addr(i))
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if _, err := run(ctx, "redis-cli", args...); err != nil {
		return nil, err
	}
	for i := create; i < n; i++ {
		if _, err := run(ctx, "redis-cli", "--cluster", "add-node", r.addr(i), r.addr(0)); err != nil {
			return nil, err
		}
	}
	return r, r.waitAgreed(ctx)
}

// waitAgreed polls `redis-cli --cluster check` until every node agrees
// about the slots and sees every other node.
func (r *redisCluster) waitAgreed(ctx context.Context) error {
	return poll(ctx, 60*time.Second, 100*time.Millisecond, "redis cluster agreement", func() error {
		out, err := run(ctx, "redis-cli", "--cluster", "check", r.addr(0))
		if err != nil {
			return err
		}
		if !strings.Contains(out, "All nodes agree about slots configuration") || strings.Contains(out, "[ERR]") {
			return errors.New("not agreed yet")
		}
		for i := range r.ports {
			c := redis.NewClient(&redis.Options{Addr: r.addr(i)})
			nodes, err := c.ClusterNodes(ctx).Result()
			info, ierr := c.ClusterInfo(ctx).Result()
			c.Close()
			if ierr != nil {
				return ierr
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster state not ok yet", r.addr(i))
			}
			if err != nil {
				return err
			}
			if strings.Count(strings.TrimSpace(nodes), "\n")+1 != len(r.ports) || strings.Contains(nodes, "handshake") {
				return errors.New("gossip not settled")
			}
		}
		return nil
	})
}

// freeRedisPorts returns free ports whose +10000 cluster bus port is free
// too.
func freeRedisPorts(n int) ([]int, error) {
	var out []int
	for p := 30001; p < 30200 && len(out) < n; p++ {
		if portFree(p) && portFree(p+10000) {
			out = append(out, p)
		}
	}
	if len(out) < n {
		return nil, errors.New("redis: no free ports in 30001-30200 (with bus ports +10000)")
	}
	return out, nil
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// crc16 is Redis Cluster's key hash (XMODEM).
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// redisTagFor returns a hash tag whose keys land in Redis slot want.
func redisTagFor(want int) string {
	for i := 0; ; i++ {
		t := "b" + strconv.Itoa(i)
		if int(crc16([]byte(t))%16384) == want {
			return t
		}
	}
}

// owner returns the index of the master owning slot.
func (r *redisCluster) owner(ctx context.Context, slot int) (int, error) {
	c := redis.NewClient(&redis.Options{Addr: r.addr(0)})
	defer c.Close()
	ss, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return -1, err
	}
	for _, s := range ss {
		if slot >= int(s.Start) && slot <= int(s.End) {
			for i := range r.ports {
				if s.Nodes[0].Addr == r.addr(i) {
					return i, nil
				}
			}
		}
	}
	return -1, fmt.Errorf("redis: no owner for slot %d", slot)
}

// fillOne writes n keys {tag}:i of size bytes to node i with pipelines.
func (r *redisCluster) fillOne(ctx context.Context, i int, tag string, n, size int) error {
	c := redis.NewClient(&redis.Options{Addr: r.addr(i)})
	defer c.Close()
	val := strings.Repeat("v", size)
	for lo := 0; lo < n; lo += 1000 {
		p := c.Pipeline()
		for k := lo; k < min(n, lo+1000); k++ {
			p.Set(ctx, "{"+tag+"}:"+strconv.Itoa(k), val, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// fillSpread writes keys user:0..n-1 over the cluster.
func (r *redisCluster) fillSpread(ctx context.Context, n, size int) error {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.addr(0)}})
	defer c.Close()
	val := strings.Repeat("v", size)
	for lo := 0; lo < n; lo += 2000 {
		p := c.Pipeline()
		for k := lo; k < min(n, lo+2000); k++ {
			p.Set(ctx, "user:"+strconv.Itoa(k), val, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reshardCmd is the exact command moving one slot (the source's lowest:
// redis-cli takes a source's slots in ascending order) from -> to.
func (r *redisCluster) reshardCmd(from, to, pipeline int) []string {
	return []string{"--cluster", "reshard", r.addr(0), "--cluster-from", r.ids[from], "--cluster-to", r.ids[to],
		"--cluster-slots", "1", "--cluster-yes", "--cluster-pipeline", strconv.Itoa(pipeline)}
}

// countingHook counts what a go-redis ClusterClient sends to nodes: round
// trips (a pipeline is one), MOVED/ASK answers, and map reloads.
type countingHook struct {
	trips, moved, ask, reloads atomic.Int64
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		if cmd.Name() == "cluster" {
			h.reloads.Add(1)
		}
		err := next(ctx, cmd)
		h.redirect(cmd.Err())
		return err
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.redirect(c.Err())
		}
		return err
	}
}

func (h *countingHook) redirect(err error) {
	if err == nil {
		return
	}
	switch s := err.Error(); {
	case strings.HasPrefix(s, "MOVED "):
		h.moved.Add(1)
	case strings.HasPrefix(s, "ASK "):
		h.ask.Add(1)
	}
}
