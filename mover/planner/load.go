package planner

import (
	"fmt"
	"math"
	"strings"

	"github.com/slotd/slotd/slots"
)

// SlotLoad is the measured load of one slot on the node that owns it.
type SlotLoad struct {
	Slot uint16 `json:"slot"`
	// Keys and Bytes are what the slot holds now.
	Keys  float64 `json:"keys"`
	Bytes float64 `json:"bytes"`
	// Reads and Writes are decaying averages, in requests per second.
	Reads  float64 `json:"reads"`
	Writes float64 `json:"writes"`
}

// Ops is the slot's request rate: reads and writes per second.
func (l SlotLoad) Ops() float64 { return l.Reads + l.Writes }

// HotKey is one of a node's hottest keys, as its heavy-hitter sketch
// estimates it: Rate requests per second, over-estimated by at most Err.
type HotKey struct {
	Key  string  `json:"key"`
	Rate float64 `json:"rate"`
	Err  float64 `json:"err"`
	Slot uint16  `json:"slot"`
}

// NodeLoad is one node's last load report: the slots it owns that hold data
// or see traffic (a slot not listed is empty and idle) and its hottest keys.
type NodeLoad struct {
	Slots   []SlotLoad `json:"slots"`
	HotKeys []HotKey   `json:"hot_keys,omitempty"`
}

// Validate refuses a report the planner cannot use: a slot out of range or
// listed twice, a load that is negative, NaN or infinite. A refused report
// must change nothing.
func (l NodeLoad) Validate() error {
	var seen slots.Set
	for _, s := range l.Slots {
		if int(s.Slot) >= slots.Count {
			return fmt.Errorf("%w: load for slot %d, out of range 0-%d", ErrInvalid, s.Slot, slots.Count-1)
		}
		if seen.Contains(slots.MustNew(int(s.Slot))) {
			return fmt.Errorf("%w: load for slot %d listed twice", ErrInvalid, s.Slot)
		}
		seen.Add(slots.MustNew(int(s.Slot)))
		for _, f := range [...]struct {
			name string
			v    float64
		}{{"keys", s.Keys}, {"bytes", s.Bytes}, {"reads", s.Reads}, {"writes", s.Writes}} {
			if err := checkLoad(f.v); err != nil {
				return fmt.Errorf("%w: slot %d %s %v: %v", ErrInvalid, s.Slot, f.name, f.v, err)
			}
		}
	}
	for _, k := range l.HotKeys {
		if int(k.Slot) >= slots.Count {
			return fmt.Errorf("%w: hot key %q in slot %d, out of range 0-%d", ErrInvalid, k.Key, k.Slot, slots.Count-1)
		}
		if err := checkLoad(k.Rate); err != nil {
			return fmt.Errorf("%w: hot key %q rate %v: %v", ErrInvalid, k.Key, k.Rate, err)
		}
		if err := checkLoad(k.Err); err != nil {
			return fmt.Errorf("%w: hot key %q error bound %v: %v", ErrInvalid, k.Key, k.Err, err)
		}
	}
	return nil
}

func checkLoad(v float64) error {
	switch {
	case math.IsNaN(v):
		return fmt.Errorf("not a number")
	case math.IsInf(v, 0):
		return fmt.Errorf("infinite")
	case v < 0:
		return fmt.Errorf("negative")
	}
	return nil
}

// BalanceBy says what a plan balances.
type BalanceBy string

// Balance modes. The zero value is BalanceAuto.
const (
	// BalanceSlots balances slot counts in proportion to weight (the
	// planner's original policy, and redis-cli --cluster rebalance's).
	BalanceSlots BalanceBy = "slots"
	// BalanceBytes balances the bytes each node holds against its share.
	BalanceBytes BalanceBy = "bytes"
	// BalanceOps balances requests per second (reads + writes).
	BalanceOps BalanceBy = "ops"
	// BalanceAuto balances bytes and ops together: a node is inside the band
	// only when both its bytes ratio and its ops ratio are, and a move is
	// scored by the larger of the two ratios it leaves. With no load report
	// at all it falls back to slot counts.
	BalanceAuto BalanceBy = "auto"
)

// DefaultTolerance is the dead band: a node within 10% of its share is
// balanced.
const DefaultTolerance = 0.10

// ParseBalanceBy parses slots, bytes, ops or auto (and "" as auto).
func ParseBalanceBy(s string) (BalanceBy, error) {
	switch b := BalanceBy(strings.ToLower(strings.TrimSpace(s))); b {
	case "":
		return BalanceAuto, nil
	case BalanceSlots, BalanceBytes, BalanceOps, BalanceAuto:
		return b, nil
	}
	return "", fmt.Errorf("%w: balance by %q; want slots, bytes, ops or auto", ErrInvalid, s)
}

// String returns the mode's name; the zero value reads "auto".
func (b BalanceBy) String() string {
	if b == "" {
		return string(BalanceAuto)
	}
	return string(b)
}

// Type names the flag's value for pflag's help.
func (b *BalanceBy) Type() string { return "mode" }

// Set implements flag.Value, so a BalanceBy can be a flag directly.
func (b *BalanceBy) Set(s string) error {
	v, err := ParseBalanceBy(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}
