package main

import (
	"fmt"
	"os"
	"time"

	"github.com/slotd/slotd/bench/internal/host"
)

// sample is everything read at one instant: etcd's and slotd's metrics and
// the CPU time and memory of etcd, slotd and this process (the nodes).
type sample struct {
	at                time.Time
	etcd, slotd       metrics
	etcdU, slotdU, me usage
	load              string
}

// take reads a sample from the running cluster.
func (c *cluster) take() (sample, error) {
	s := sample{at: time.Now(), load: host.LoadAverages()}
	var err error
	if s.etcd, err = scrapeRetry(c.etcdURL + "/metrics"); err != nil {
		return s, err
	}
	if s.slotd, err = scrapeRetry("http://" + c.slotdHTTP + "/metrics"); err != nil {
		return s, err
	}
	if s.etcdU, err = procUsage(c.etcd.pid()); err != nil {
		return s, err
	}
	if s.slotdU, err = procUsage(c.slotd.pid()); err != nil {
		return s, err
	}
	s.me, err = procUsage(os.Getpid())
	return s, err
}

// window is what happened between two samples.
type window struct {
	name  string
	a, b  sample
	moves int // directory moves made in it (0: none)
	steps int // transactions per move
}

func (w window) secs() float64 { return w.b.at.Sub(w.a.at).Seconds() }

// etcdRate is a counter's increase per second on etcd.
func (w window) etcdRate(name string, labels ...string) float64 {
	return (w.b.etcd.sum(name, labels...) - w.a.etcd.sum(name, labels...)) / w.secs()
}

// slotdRate is a counter's increase per second on slotd.
func (w window) slotdRate(name string, labels ...string) float64 {
	return (w.b.slotd.sum(name, labels...) - w.a.slotd.sum(name, labels...)) / w.secs()
}

// cores is a process's CPU time per second of the window.
func cores(a, b usage, secs float64) float64 { return (b.cpu - a.cpu).Seconds() / secs }

// The etcd metrics a window reports: what each means is in docs/scale.md.
const (
	mProposals = "etcd_server_proposals_committed_total"
	mPuts      = "etcd_mvcc_put_total"
	mDeletes   = "etcd_mvcc_delete_total"
	mTxns      = "etcd_mvcc_txn_total"
	mRanges    = "etcd_mvcc_range_total"
	mRenewed   = "etcd_debugging_lease_renewed_total"
	mPutBytes  = "etcd_debugging_mvcc_total_put_size_in_bytes"
	mWALBytes  = "etcd_disk_wal_write_bytes_total"
	mFsyncs    = "etcd_disk_wal_fsync_duration_seconds_count"
	mRecvBytes = "etcd_network_client_grpc_received_bytes_total"
	mSentBytes = "etcd_network_client_grpc_sent_bytes_total"
	mDBSize    = "etcd_mvcc_db_total_size_in_bytes"
	mDBInUse   = "etcd_mvcc_db_total_size_in_use_in_bytes"
	mQuota     = "etcd_server_quota_backend_bytes"
	mHandled   = "slotd_grpc_server_handled_total"
	mHeap      = "go_memstats_heap_inuse_bytes"
)

// rpc is the label selecting one gRPC method in grpc-prometheus metrics.
func rpc(method string) string { return fmt.Sprintf("grpc_method=%q", method) }

// mib formats bytes as MiB with one decimal.
func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// kib formats bytes as KiB with one decimal.
func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/(1<<10)) }
