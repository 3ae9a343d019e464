package planner

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/slotd/slotd/slots"
)

// SlotLoad is the measured load of one slot on the node that owns it: what
// the node's last load report said of it (load.Aggregator keeps those), or
// its size as the store answered it (the mover's fresh sizes).
type SlotLoad struct {
	Slot uint16 `json:"slot"`
	// Keys and Bytes are what the slot holds now.
	Keys  float64 `json:"keys"`
	Bytes float64 `json:"bytes"`
	// Reads and Writes are the ~10-minute decaying averages, in requests
	// per second: what a plan balances.
	Reads  float64 `json:"reads"`
	Writes float64 `json:"writes"`
	// Reads1m and Writes1m are the ~1-minute averages: shown, never
	// balanced (too quick to follow).
	Reads1m  float64 `json:"reads_1m,omitempty"`
	Writes1m float64 `json:"writes_1m,omitempty"`
	// Tag is the hash tag the slot's hot keys share, "" when none.
	Tag string `json:"tag,omitempty"`
	// Measured is how many seconds of the rates the owner measured since
	// it gained the slot (0: since it started).
	Measured float64 `json:"measured_seconds,omitempty"`
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
	// Truncated says Key is only the first bytes of a longer key (the
	// sketch keeps 128): Slot is then the node's word, not Key's.
	Truncated bool `json:"truncated,omitempty"`
}

// NodeLoad is one node's last load report: the slots it owns that hold data
// or see traffic (a slot not listed is empty and idle) and its hottest keys.
type NodeLoad struct {
	Slots   []SlotLoad `json:"slots"`
	HotKeys []HotKey   `json:"hot_keys,omitempty"`
}

// Validate says why l cannot be a measurement, nil when it can: a slot out
// of range or listed twice, a value that is negative, NaN or infinite. This
// is the one check of a load, wherever it comes from: Compute refuses such
// input (ErrInvalid), load.Aggregator such a report (load.ErrInvalid); the
// error names the slot or key and the value, for the caller to wrap.
func (l NodeLoad) Validate() error {
	var seen slots.Set
	for _, s := range l.Slots {
		if int(s.Slot) >= slots.Count {
			return fmt.Errorf("load of slot %d, out of range 0-%d", s.Slot, slots.Count-1)
		}
		if seen.Contains(slots.MustNew(int(s.Slot))) {
			return fmt.Errorf("load of slot %d listed twice", s.Slot)
		}
		seen.Add(slots.MustNew(int(s.Slot)))
		for _, f := range [...]struct {
			name string
			v    float64
		}{
			{"keys", s.Keys}, {"bytes", s.Bytes}, {"reads_10m", s.Reads}, {"writes_10m", s.Writes},
			{"reads_1m", s.Reads1m}, {"writes_1m", s.Writes1m}, {"measured_seconds", s.Measured},
		} {
			if err := checkLoad(f.v); err != nil {
				return fmt.Errorf("slot %d %s %v: %v", s.Slot, f.name, f.v, err)
			}
		}
	}
	for _, k := range l.HotKeys {
		if int(k.Slot) >= slots.Count {
			return fmt.Errorf("hot key %q in slot %d, out of range 0-%d", k.Key, k.Slot, slots.Count-1)
		}
		if err := checkLoad(k.Rate); err != nil {
			return fmt.Errorf("hot key %q rate %v: %v", k.Key, k.Rate, err)
		}
		if err := checkLoad(k.Err); err != nil {
			return fmt.Errorf("hot key %q error %v: %v", k.Key, k.Err, err)
		}
	}
	return nil
}

func checkLoad(v float64) error {
	switch {
	case math.IsNaN(v):
		return errors.New("not a number")
	case math.IsInf(v, 0):
		return errors.New("infinite")
	case v < 0:
		return errors.New("negative")
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
