package directory

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/slotd/slotd/slots"
)

// The etcd key layout. Every key slotd uses is built in this file, under a
// prefix P (Config.Prefix, default "/slotd/"):
//
//	P schema                 schema version, decimal. Written by migrations
//	                         only; every mutation compares it, so a binary
//	                         still running an older layout stops writing
//	                         the moment a newer one upgrades the schema.
//	P version                the cluster version, decimal. Every versioned
//	                         change is one txn that compares this key's mod
//	                         revision and puts version+1: this single key
//	                         serializes all writers.
//	P owners/NN              NN = 00..63: owners of slots NN*256 .. NN*256+255,
//	                         one big-endian uint16 node index per slot (512
//	                         bytes; 0xffff = no owner). A one-slot change
//	                         rewrites one chunk, not 16,384 keys; a snapshot
//	                         reads 64 small values.
//	P replicas/NN            NN = 00..63: the replica sets of slots NN*256 ..
//	                         NN*256+255 that are stored (replicas.go): per
//	                         slot its offset in the chunk (one byte), its
//	                         epoch, its ISR (primary first) and learners as
//	                         node indexes, each list length-prefixed, all
//	                         uvarints. A slot whose set is just its owner,
//	                         at the epoch of its last owner change (every
//	                         slot at rf 1), is not stored; a chunk of such
//	                         slots is absent. owners/NN keeps naming each
//	                         slot's primary.
//	P replication            the replication policy, JSON {rf, min_isr}
//	                         (replication.go); absent reads as rf 1.
//	P nodes/<id>             JSON node record, including its index.
//	P moves/<slot, 5 digits> JSON record of the move in flight for that slot.
//	P history/<version, 20>  JSON record of what changed at that version and
//	                         why. Exactly one per version, so trimming to the
//	                         last N is one range delete in the same txn.
//	P cluster                the cluster's id, put once (ClusterID) and kept
//	                         by a restore, so that clients never take a map
//	                         of another cluster sharing the etcd, nor refuse
//	                         the map of their own restored elsewhere.
//
// Unversioned keys (not part of the table, not in snapshots):
//
//	P alive/<id>             liveness: attached to the node's etcd lease;
//	                         value = JSON {since}. Gone when the lease expires.
//	P throttle               mover throttle in bytes per second, decimal.
//	P plans/<id>             mover plans, bytes opaque to the directory;
//	                         rewritten by compare-and-swap (UpdatePlan).
//	P run/<id>               exists while plan <id> may begin moves. Every
//	                         BeginMove of a plan's move compares it (group
//	                         commits too); Apply and Resume create it and
//	                         pause, cancel and finish delete it, each in
//	                         the transaction that stores the plan's state.
//	P results/<id>/<index>   JSON MoveResult of move <index> (5 digits) of
//	                         plan <id>: written by the transaction that
//	                         commits or aborts the move (or records it
//	                         skipped), so it is never behind the table.
//	P audit/<kind>/<seq>     the audit log (audit.go): JSON AuditEntry, kind
//	                         cluster, node or plan, seq = 20-digit unix nanos
//	                         "-" 10-digit counter. Written in the txn of the
//	                         action it records; each kind bounded apart.
//	P locks/<name>           client/v3/concurrency mutexes (migrations).
//	P leader/                mover leader election (concurrency.Election).
//	P auto/policy            the automatic balancer's policy (AutoPolicy, JSON;
//	                         absent: off, the defaults). CAS on its revision.
//	P auto/state             the balancer's state across leaders (AutoState,
//	                         JSON): backoff, the last hour's automatic plans.
//
// The versioned keys sort before "alive", so nothing here depends on the
// order; watchers read every key under P and ignore what they do not know.
const (
	// DefaultPrefix is the key prefix when Config.Prefix is empty.
	DefaultPrefix = "/slotd/"

	// chunkSlots is the number of slots per owners chunk; 64 chunks.
	chunkSlots = 256
	chunks     = slots.Count / chunkSlots

	// noOwner marks a slot without owner in a chunk (only before bootstrap
	// completes, which never shows in a snapshot).
	noOwner = 0xffff
	// maxNodes bounds node indexes to what a chunk entry can hold.
	maxNodes = noOwner
)

// keys builds every path under one prefix. It holds no state but the prefix.
type keys struct{ p string }

func (k keys) schema() string          { return k.p + "schema" }
func (k keys) version() string         { return k.p + "version" }
func (k keys) ownersPrefix() string    { return k.p + "owners/" }
func (k keys) chunk(i int) string      { return fmt.Sprintf("%sowners/%02d", k.p, i) }
func (k keys) replicasPrefix() string  { return k.p + "replicas/" }
func (k keys) replicas(i int) string   { return fmt.Sprintf("%sreplicas/%02d", k.p, i) }
func (k keys) replication() string     { return k.p + "replication" }
func (k keys) nodesPrefix() string     { return k.p + "nodes/" }
func (k keys) node(id string) string   { return k.p + "nodes/" + id }
func (k keys) movesPrefix() string     { return k.p + "moves/" }
func (k keys) move(s uint16) string    { return fmt.Sprintf("%smoves/%05d", k.p, s) }
func (k keys) historyPrefix() string   { return k.p + "history/" }
func (k keys) history(v uint64) string { return fmt.Sprintf("%shistory/%020d", k.p, v) }
func (k keys) alivePrefix() string     { return k.p + "alive/" }
func (k keys) alive(id string) string  { return k.p + "alive/" + id }
func (k keys) throttle() string        { return k.p + "throttle" }
func (k keys) plansPrefix() string     { return k.p + "plans/" }
func (k keys) plan(id string) string   { return k.p + "plans/" + id }
func (k keys) lock(name string) string { return k.p + "locks/" + name }
func (k keys) runPrefix() string       { return k.p + "run/" }
func (k keys) run(id string) string    { return k.p + "run/" + id }
func (k keys) resultsPrefix() string   { return k.p + "results/" }
func (k keys) resultsOf(id string) string {
	return k.p + "results/" + id + "/"
}
func (k keys) result(id string, i int) string {
	return fmt.Sprintf("%sresults/%s/%05d", k.p, id, i)
}
func (k keys) leaderPrefix() string { return k.p + "leader/" }
func (k keys) cluster() string      { return k.p + "cluster" }
func (k keys) autoPolicy() string   { return k.p + "auto/policy" }
func (k keys) autoState() string    { return k.p + "auto/state" }
func (k keys) all() string          { return k.p }

// auditPrefix and audit name the audit log's keys (audit.go).
func (k keys) auditPrefix(kind string) string { return k.p + "audit/" + kind + "/" }
func (k keys) audit(kind, seq string) string  { return k.auditPrefix(kind) + seq }

// keyKind says which part of the table a key under the prefix holds.
type keyKind int

const (
	kindOther keyKind = iota
	kindSchema
	kindVersion
	kindChunk
	kindNode
	kindMove
	kindRun
	kindReplicas
	kindReplication
)

// parse classifies a key read from etcd and returns its chunk number, node
// id or slot. Unknown keys are kindOther so that watchers skip keys a newer
// minor layout may add.
func (k keys) parse(key string) (kind keyKind, chunk int, id string, slot uint16) {
	switch {
	case key == k.schema():
		return kindSchema, 0, "", 0
	case key == k.version():
		return kindVersion, 0, "", 0
	case strings.HasPrefix(key, k.ownersPrefix()):
		n, err := strconv.Atoi(key[len(k.ownersPrefix()):])
		if err != nil || n < 0 || n >= chunks {
			return kindOther, 0, "", 0
		}
		return kindChunk, n, "", 0
	case strings.HasPrefix(key, k.replicasPrefix()):
		n, err := strconv.Atoi(key[len(k.replicasPrefix()):])
		if err != nil || n < 0 || n >= chunks {
			return kindOther, 0, "", 0
		}
		return kindReplicas, n, "", 0
	case key == k.replication():
		return kindReplication, 0, "", 0
	case strings.HasPrefix(key, k.nodesPrefix()):
		return kindNode, 0, key[len(k.nodesPrefix()):], 0
	case strings.HasPrefix(key, k.movesPrefix()):
		n, err := strconv.Atoi(key[len(k.movesPrefix()):])
		if err != nil || n < 0 || n >= slots.Count {
			return kindOther, 0, "", 0
		}
		return kindMove, 0, "", uint16(n)
	case strings.HasPrefix(key, k.runPrefix()):
		return kindRun, 0, key[len(k.runPrefix()):], 0
	}
	return kindOther, 0, "", 0
}

// LeaderElectionPrefix is the prefix for the mover's leader election
// (concurrency.NewElection). It lives here so that the directory stays the
// only code that knows where slotd keeps anything in etcd.
func (d *Directory) LeaderElectionPrefix() string { return d.k.leaderPrefix() }
