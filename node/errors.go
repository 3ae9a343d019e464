package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/slotd/slotd/slots"
)

var (
	// ErrMoved matches (errors.Is) a *RedirectError of kind Moved: this node
	// does not own the slot; ask the owner named in the error.
	ErrMoved = errors.New("node: slot moved")
	// ErrAsk matches a *RedirectError of kind Ask: during a move, ask the
	// named node for this one request without updating the map.
	ErrAsk = errors.New("node: ask another node")
	// ErrFenced is returned for a write to a slot that is being handed off.
	// It is retryable: the move commits or aborts within moments.
	ErrFenced = errors.New("node: slot fenced for a move; retry shortly")
	// ErrNoMap is returned while the node has not yet received a slot map,
	// so it cannot know what it owns. Retryable.
	ErrNoMap = errors.New("node: slot map not loaded yet; retry shortly")
	// ErrWrongSlot is returned when a batch holds a key of another slot.
	ErrWrongSlot = errors.New("node: key belongs to another slot")
	// ErrOwned is returned when asked to drop or overwrite a slot this node
	// currently owns: that would lose acknowledged writes.
	ErrOwned = errors.New("node: slot is owned by this node")
	// ErrCaptureLost is returned when changes are asked for a capture that
	// no longer exists (ended, or a different capture id): the copy must
	// start again from an empty target.
	ErrCaptureLost = errors.New("node: change capture not found; restart the copy")
	// ErrMoveMismatch is returned when a call names a move id other than the
	// slot's current move.
	ErrMoveMismatch = errors.New("node: move id does not match the slot's current move")
	// ErrImportOrder is returned for an import out of order: a snapshot
	// batch after changes, a gap in batch or change sequence numbers, or
	// changes before the snapshot is complete.
	ErrImportOrder = errors.New("node: import out of order")
	// ErrDropping is returned for an import into a slot whose earlier copy
	// is still being dropped. Retryable.
	ErrDropping = errors.New("node: slot is still being dropped; retry shortly")
	// ErrMapBehind is returned when a call names a directory version newer
	// than this node's map: retry once the map has caught up.
	ErrMapBehind = errors.New("node: slot map older than the version asked for; retry shortly")
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("node: closed")
)

// RedirectKind says how a client should follow a redirect.
type RedirectKind int

const (
	// Moved: the slot has a new owner; refresh the map and go there.
	Moved RedirectKind = iota + 1
	// Ask: the key is already on the move's target; ask it once, keep the map.
	Ask
)

func (k RedirectKind) String() string {
	switch k {
	case Moved:
		return "MOVED"
	case Ask:
		return "ASK"
	}
	return fmt.Sprintf("RedirectKind(%d)", int(k))
}

// RedirectError tells a client which node to ask instead. Its text has the
// Redis Cluster form "MOVED 4546 127.0.0.1:7500" followed by the owner id and
// the map version the answer was based on.
type RedirectError struct {
	Kind    RedirectKind
	Slot    slots.Slot
	Owner   string // node id
	Addr    string // owner's address, empty if the map does not know it
	Version uint64 // map version this node answered from
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s %d %s (owner %s, map version %d)", e.Kind, e.Slot.Int(), e.Addr, e.Owner, e.Version)
}

// Is makes errors.Is(err, ErrMoved) and errors.Is(err, ErrAsk) work.
func (e *RedirectError) Is(target error) bool {
	return (target == ErrMoved && e.Kind == Moved) || (target == ErrAsk && e.Kind == Ask)
}

// FencedError is returned for a write to a fenced slot; errors.Is(err,
// ErrFenced) holds. RetryAfter is the suggested delay before retrying.
type FencedError struct {
	Slot       slots.Slot
	Version    uint64 // directory version the mover fenced at
	MoveID     string
	RetryAfter time.Duration
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("node: slot %d fenced for move %s at version %d; retry in %s", e.Slot.Int(), e.MoveID, e.Version, e.RetryAfter)
}

// Is makes errors.Is(err, ErrFenced) work.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
