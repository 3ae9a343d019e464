package linz

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/slotd/slotd/slotkv/workload"
)

// state is one key's register.
type state struct {
	value   string
	version uint64
}

// output is what a call returned; unknown for a failed write.
type output struct {
	unknown bool
	found   bool
	value   string
	version uint64
	swapped bool
}

// Model is the per-key versioned register.
var Model = porcupine.Model{
	Partition: byKey,
	Init:      func() any { return state{} },
	Step: func(st, in, out any) (bool, any) {
		s, op, o := st.(state), in.(workload.Op), out.(output)
		switch op.Kind {
		case workload.Get:
			ok := o.version == s.version && o.found == (s.version > 0) && (!o.found || o.value == s.value)
			return ok, s
		case workload.Put:
			next := state{op.Value, s.version + 1}
			return o.unknown || o.version == next.version, next
		case workload.CAS:
			if s.version != op.Expected {
				return o.unknown || (!o.swapped && o.version == s.version), s
			}
			next := state{op.Value, s.version + 1}
			return o.unknown || (o.swapped && o.version == next.version), next
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		op, o := in.(workload.Op), out.(output)
		res := fmt.Sprintf("v%d", o.version)
		switch {
		case o.unknown:
			res = "unknown"
		case op.Kind == workload.Get && !o.found:
			res = "not found"
		case op.Kind == workload.Get:
			res = fmt.Sprintf("%q v%d", o.value, o.version)
		case op.Kind == workload.CAS:
			res = fmt.Sprintf("swapped=%v v%d", o.swapped, o.version)
		}
		switch op.Kind {
		case workload.Put:
			return fmt.Sprintf("put(%s, %q) -> %s", op.Key, op.Value, res)
		case workload.CAS:
			return fmt.Sprintf("cas(%s, v%d, %q) -> %s", op.Key, op.Expected, op.Value, res)
		}
		return fmt.Sprintf("get(%s) -> %s", op.Key, res)
	},
	DescribeState: func(st any) string {
		s := st.(state)
		if s.version == 0 {
			return "absent"
		}
		return fmt.Sprintf("%q v%d", s.value, s.version)
	},
}

// byKey splits a history into one history per key, in first-seen order.
func byKey(ops []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		k := op.Input.(workload.Op).Key
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// Operations converts a history into porcupine operations, leaving out
// calls that changed and observed nothing.
func Operations(h workload.History) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, op := range h.Ops {
		if op.Err != "" && !op.Unknown {
			continue
		}
		o := output{unknown: op.Unknown, found: op.Found, value: op.Got, version: op.Version, swapped: op.Swapped}
		ret := op.Return
		if op.Unknown {
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Output: o, Return: ret})
	}
	return ops
}

// Result is the outcome of Check.
type Result struct {
	Outcome porcupine.CheckResult
	Ops     int
	info    porcupine.LinearizationInfo
}

// OK reports whether the history was found linearizable.
func (r Result) OK() bool { return r.Outcome == porcupine.Ok }

// Visualize writes porcupine's HTML view of the history and the longest
// linearizable prefixes to path.
func (r Result) Visualize(path string) error {
	if err := porcupine.VisualizePath(Model, r.info, path); err != nil {
		return fmt.Errorf("linz: visualize: %w", err)
	}
	return nil
}

// Check checks h; after timeout it gives up with Outcome porcupine.Unknown.
func Check(h workload.History, timeout time.Duration) Result {
	ops := Operations(h)
	res, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	return Result{Outcome: res, Ops: len(ops), info: info}
}
