package ringcompat

import "errors"

// Errors returned by this package, always wrapped with the offending input;
// test for them with errors.Is. A call that returns an error changes nothing.
var (
	// ErrNoNodes: InitialAssignment, NewRendezvous or LookupBounded without nodes.
	ErrNoNodes = errors.New("ringcompat: no nodes")
	// ErrBadWeight: a node weight is zero or negative.
	ErrBadWeight = errors.New("ringcompat: node weight must be positive")
	// ErrDuplicateNode: two nodes share an id, or Add met an id already on the ring.
	ErrDuplicateNode = errors.New("ringcompat: duplicate node id")
	// ErrBadNodeID: an empty id, or one the point hash cannot place
	// (Seed000 takes only decimal uint32s).
	ErrBadNodeID = errors.New("ringcompat: bad node id")
	// ErrUnknownNode: Remove of an id not on the ring.
	ErrUnknownNode = errors.New("ringcompat: unknown node")
	// ErrBadVNodes: vnodes out of range.
	ErrBadVNodes = errors.New("ringcompat: vnodes must be positive")
	// ErrTooManyPoints: weights times vnodes past MaxPoints.
	ErrTooManyPoints = errors.New("ringcompat: too many ring points")
	// ErrUnknownHash: HashByName of a name it does not know.
	ErrUnknownHash = errors.New("ringcompat: unknown point hash")
	// ErrBadLoad: a LookupBounded load vector or eps that cannot be used.
	ErrBadLoad = errors.New("ringcompat: bad load vector")
)
