package ringcompat

import "errors"

// Errors returned by this package, always wrapped with the offending input;
// test for them with errors.Is. A call that returns an error changes nothing.
var (
	ErrNoNodes       = errors.New("ringcompat: no nodes")
	ErrBadWeight     = errors.New("ringcompat: node weight must be positive")
	ErrDuplicateNode = errors.New("ringcompat: duplicate node id")
	ErrBadNodeID     = errors.New("ringcompat: bad node id")
	ErrUnknownNode   = errors.New("ringcompat: unknown node")
	ErrBadVNodes     = errors.New("ringcompat: vnodes must be positive")
	ErrTooManyPoints = errors.New("ringcompat: too many ring points")
	ErrUnknownHash   = errors.New("ringcompat: unknown point hash")
	ErrBadLoad       = errors.New("ringcompat: bad load vector")
)
