package workload

import (
	"fmt"
	"sort"
)

// History is a workload's recorded operations.
type History struct {
	Ops  []Op
	keys []string
}

// Stats counts a history's operations.
type Stats struct {
	Ops, Reads, Writes int
	// Errors counts failed calls of any kind (client errors); Unknown
	// counts failed writes whose outcome is not known.
	Errors, Unknown int
}

// Stats returns the history's counts.
func (h History) Stats() Stats {
	var s Stats
	for _, op := range h.Ops {
		s.Ops++
		if op.Kind == Get {
			s.Reads++
		} else {
			s.Writes++
		}
		if op.Err != "" {
			s.Errors++
		}
		if op.Unknown {
			s.Unknown++
		}
	}
	return s
}

// FirstErrors returns up to n error messages, oldest first.
func (h History) FirstErrors(n int) []string {
	var out []string
	for _, op := range h.Ops {
		if op.Err != "" && len(out) < n {
			out = append(out, fmt.Sprintf("client %d %s %s: %s", op.Client, op.Kind, op.Key, op.Err))
		}
	}
	return out
}

// LostWrites compares every key's final read (Workload.Final) with the
// acknowledged writes: versions only grow by one per write, so the final
// version must be at least the highest acknowledged one, and equal to it
// only with the same value. It returns one line per key that fails, and
// one per key without a successful final read.
func (h History) LostWrites() []string {
	type acked struct {
		version uint64
		value   string
	}
	best := map[string]acked{}
	final := map[string]Op{}
	for _, op := range h.Ops {
		switch {
		case op.Final && op.Err == "":
			final[op.Key] = op
		case op.Err != "":
		case op.Kind == Put || (op.Kind == CAS && op.Swapped):
			if op.Version > best[op.Key].version {
				best[op.Key] = acked{op.Version, op.Value}
			}
		}
	}
	var lost []string
	for _, k := range h.keys {
		b, wrote := best[k]
		f, ok := final[k]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s: no final read", k))
		case !wrote:
		case f.Version < b.version:
			lost = append(lost, fmt.Sprintf("%s: acknowledged version %d (%q), final read version %d (%q)", k, b.version, b.value, f.Version, f.Got))
		case f.Version == b.version && f.Got != b.value:
			lost = append(lost, fmt.Sprintf("%s: version %d acknowledged as %q, final read %q", k, b.version, b.value, f.Got))
		}
	}
	sort.Strings(lost)
	return lost
}
