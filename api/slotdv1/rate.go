package slotdv1

import "math"

// RateUnlimited is the ExportRequest rate_bytes_per_second that asks the
// node for no export limit. 0 there leaves the node's rate as it is, so a
// mover whose throttle is unlimited sends RateUnlimited: a donor that last
// exported under a limit would otherwise keep it.
const RateUnlimited uint64 = math.MaxUint64
