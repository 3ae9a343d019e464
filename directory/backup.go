package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BackupFormat names the layout of a backup document.
const BackupFormat = "slotd-directory-backup/1"

// DefaultBackupHistory is how many of the newest history entries a backup
// keeps when asked for 0.
const DefaultBackupHistory = 1000

// DefaultVersionMargin is how far a restore moves the version past the
// saved one.
const DefaultVersionMargin = 1000

// Backup is the directory's durable state at one etcd revision: every key
// under the prefix (slot table, version, schema, nodes, moves, plans and
// their records, throttle, policies, the cluster id) but the ones that
// belong to running processes (liveness leases, the leader election,
// locks), and the newest history entries. Keys are relative to the prefix,
// so a backup can be restored under another one.
type Backup struct {
	Format       string      `json:"format"`
	Prefix       string      `json:"prefix"`
	EtcdRevision int64       `json:"etcd_revision"`
	Version      uint64      `json:"version"`
	Schema       int         `json:"schema"`
	ClusterID    string      `json:"cluster_id,omitempty"`
	Created      time.Time   `json:"created"`
	Keys         []BackupKey `json:"keys"`
}

// BackupKey is one key and its value.
type BackupKey struct {
	Key   string `json:"k"`
	Value []byte `json:"v"`
}

// ephemeral reports whether a key (relative to the prefix) belongs to a
// running process rather than to the directory's state.
func ephemeral(rel string) bool {
	for _, p := range []string{"alive/", "leader/", "locks/"} {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

// Backup reads the directory at one etcd revision. history bounds the
// history entries kept (the newest; 0: DefaultBackupHistory). It needs a
// schema in place, not a bootstrap.
func (d *Directory) Backup(ctx context.Context, history int) (*Backup, error) {
	if history <= 0 {
		history = DefaultBackupHistory
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	hp := d.k.historyPrefix()
	// Everything before history/, then the newest history entries and
	// everything after history/, both at the first read's revision.
	before, err := d.cli.Get(rctx, d.k.all(), clientv3.WithRange(hp))
	if err != nil {
		return nil, fromEtcd(ctx, "backup", err)
	}
	rev := before.Header.Revision
	hist, err := d.cli.Get(rctx, hp, clientv3.WithPrefix(), clientv3.WithRev(rev),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(history)))
	if err != nil {
		return nil, fromEtcd(ctx, "backup history", err)
	}
	after, err := d.cli.Get(rctx, clientv3.GetPrefixRangeEnd(hp), clientv3.WithRange(clientv3.GetPrefixRangeEnd(d.k.all())), clientv3.WithRev(rev))
	if err != nil {
		return nil, fromEtcd(ctx, "backup", err)
	}
	b := &Backup{Format: BackupFormat, Prefix: d.cfg.Prefix, EtcdRevision: rev, Created: d.cfg.Now().UTC()}
	for _, r := range []*clientv3.GetResponse{before, hist, after} {
		for _, kv := range r.Kvs {
			rel := strings.TrimPrefix(string(kv.Key), d.cfg.Prefix)
			if ephemeral(rel) {
				continue
			}
			b.Keys = append(b.Keys, BackupKey{Key: rel, Value: kv.Value})
			switch string(kv.Key) {
			case d.k.version():
				if b.Version, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
					return nil, fmt.Errorf("directory: backup: version key holds %q", kv.Value)
				}
			case d.k.schema():
				if b.Schema, err = strconv.Atoi(string(kv.Value)); err != nil {
					return nil, fmt.Errorf("directory: backup: schema key holds %q", kv.Value)
				}
			case d.k.cluster():
				b.ClusterID = string(kv.Value)
			}
		}
	}
	slices.SortFunc(b.Keys, func(x, y BackupKey) int { return strings.Compare(x.Key, y.Key) })
	if b.Schema == 0 {
		return nil, fmt.Errorf("%w: nothing to back up under %q", ErrNoSchema, d.cfg.Prefix)
	}
	return b, nil
}

// Marshal encodes the backup as its document.
func (b *Backup) Marshal() ([]byte, error) { return json.MarshalIndent(b, "", " ") }

// ParseBackup decodes and checks a backup document.
func ParseBackup(doc []byte) (*Backup, error) {
	var b Backup
	if err := json.Unmarshal(doc, &b); err != nil {
		return nil, fmt.Errorf("%w: not a backup document: %w", ErrInvalid, err)
	}
	if b.Format != BackupFormat {
		return nil, fmt.Errorf("%w: backup format %q, this slotd reads %q", ErrInvalid, b.Format, BackupFormat)
	}
	if b.Schema < 1 || len(b.Keys) == 0 {
		return nil, fmt.Errorf("%w: backup holds no directory (schema %d, %d keys)", ErrInvalid, b.Schema, len(b.Keys))
	}
	for _, k := range b.Keys {
		if k.Key == "" || strings.HasPrefix(k.Key, "/") || ephemeral(k.Key) {
			return nil, fmt.Errorf("%w: backup key %q", ErrInvalid, k.Key)
		}
	}
	return &b, nil
}

// RestoreOptions says how Restore treats what it finds.
type RestoreOptions struct {
	// Force clears whatever the prefix holds first. Without it a prefix
	// holding any key is refused.
	Force bool
	// VersionMargin moves the version this far past the saved one
	// (0: DefaultVersionMargin), so that clients and stores that saw
	// versions newer than the backup take the restored map as newer.
	VersionMargin uint64
}

// ErrNotEmpty: a restore found keys under the prefix.
var ErrNotEmpty = fmt.Errorf("%w: the etcd prefix is not empty", ErrPrecondition)

// Restore writes backup b under this directory's prefix and returns the
// restored version (b.Version + the margin). It refuses (ErrNotEmpty) a
// prefix holding any key unless opts.Force, and always while a slotd's
// leader election key is there (a running slotd would write over it). The
// version and schema keys are written last, in one transaction: a reader
// sees no directory, or the whole restored one.
func (d *Directory) Restore(ctx context.Context, b *Backup, opts RestoreOptions) (uint64, error) {
	if b.Schema > d.cfg.MaxSchema {
		return 0, fmt.Errorf("%w: the backup has schema %d, this slotd supports up to %d", ErrSchemaTooNew, b.Schema, d.cfg.MaxSchema)
	}
	margin := opts.VersionMargin
	if margin == 0 {
		margin = DefaultVersionMargin
	}
	rctx, cancel := context.WithTimeout(ctx, 4*d.cfg.RequestTimeout)
	defer cancel()
	leader, err := d.cli.Get(rctx, d.k.leaderPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fromEtcd(ctx, "restore", err)
	}
	if leader.Count > 0 {
		return 0, fmt.Errorf("%w: a slotd is running on %q (its election key is there); stop every slotd of this cluster first", ErrNotEmpty, d.cfg.Prefix)
	}
	held, err := d.cli.Get(rctx, d.k.all(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fromEtcd(ctx, "restore", err)
	}
	if held.Count > 0 {
		if !opts.Force {
			return 0, fmt.Errorf("%w: %q holds %d keys; restore into a fresh etcd or prefix, or pass --force to replace them", ErrNotEmpty, d.cfg.Prefix, held.Count)
		}
		if _, err := d.cli.Delete(rctx, d.k.all(), clientv3.WithPrefix()); err != nil {
			return 0, fromEtcd(ctx, "restore: clear the prefix", err)
		}
	}
	version := b.Version + margin
	var last []clientv3.Op
	var ops []clientv3.Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := d.cli.Txn(rctx).Then(ops...).Commit()
		ops = ops[:0]
		return fromEtcd(ctx, "restore", err)
	}
	for _, k := range b.Keys {
		key := d.cfg.Prefix + k.Key
		switch key {
		case d.k.version():
			continue
		case d.k.schema():
			last = append(last, clientv3.OpPut(key, string(k.Value)))
			continue
		}
		value := k.Value
		if strings.HasPrefix(key, d.k.nodesPrefix()) {
			// No node has a lease in the new etcd yet: each gets DownAfter
			// from now for its first heartbeat, like a new node, instead
			// of being marked down at the first liveness pass.
			var n nodeRec
			if err := json.Unmarshal(value, &n); err != nil {
				return 0, fmt.Errorf("%w: backup node record %s: %w", ErrInvalid, k.Key, err)
			}
			if !n.Down {
				n.StateSince = d.cfg.Now().UTC()
			}
			if value, err = json.Marshal(n); err != nil {
				return 0, fmt.Errorf("directory: restore: %w", err)
			}
		}
		ops = append(ops, clientv3.OpPut(key, string(value)))
		if len(ops) == 100 { // etcd's default limit is 128 operations a txn
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	last = append(last, clientv3.OpPut(d.k.version(), strconv.FormatUint(version, 10)))
	if _, err := d.cli.Txn(rctx).Then(last...).Commit(); err != nil {
		return 0, fromEtcd(ctx, "restore", err)
	}
	d.cache.Store(nil)
	d.lg.Warn("directory restored", "prefix", d.cfg.Prefix, "saved_version", b.Version, "version", version,
		"keys", len(b.Keys), "backup_revision", b.EtcdRevision)
	return version, nil
}
