package planner

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseBalanceBy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want BalanceBy
		err  bool
	}{
		{"", BalanceAuto, false},
		{"auto", BalanceAuto, false},
		{"slots", BalanceSlots, false},
		{" Bytes ", BalanceBytes, false},
		{"ops", BalanceOps, false},
		{"keys", "", true},
	} {
		got, err := ParseBalanceBy(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBalanceBy(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseBalanceBy(%q): %v is not ErrInvalid", tc.in, err)
		}
	}
	var b BalanceBy
	if b.String() != "auto" {
		t.Errorf("zero BalanceBy reads %q, want auto", b.String())
	}
}

func TestNodeLoadValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		load NodeLoad
		want string // "" when valid
	}{
		{"empty", NodeLoad{}, ""},
		{"fine", NodeLoad{Slots: []SlotLoad{{Slot: 3, Keys: 2, Bytes: 10, Reads: 1.5}}, HotKeys: []HotKey{{Key: "a", Rate: 3, Slot: 3}}}, ""},
		{"negative bytes", NodeLoad{Slots: []SlotLoad{{Slot: 1, Bytes: -1}}}, "slot 1 bytes -1: negative"},
		{"nan reads", NodeLoad{Slots: []SlotLoad{{Slot: 1, Reads: math.NaN()}}}, "not a number"},
		{"inf writes", NodeLoad{Slots: []SlotLoad{{Slot: 1, Writes: math.Inf(1)}}}, "infinite"},
		{"slot out of range", NodeLoad{Slots: []SlotLoad{{Slot: 16384}}}, "out of range"},
		{"duplicate slot", NodeLoad{Slots: []SlotLoad{{Slot: 5}, {Slot: 5}}}, "listed twice"},
		{"hot key nan", NodeLoad{HotKeys: []HotKey{{Key: "k", Rate: math.NaN()}}}, "not a number"},
		{"hot key negative err", NodeLoad{HotKeys: []HotKey{{Key: "k", Err: -2}}}, "negative"},
		{"nan short-window reads", NodeLoad{Slots: []SlotLoad{{Slot: 2, Reads1m: math.NaN()}}}, "slot 2 reads_1m NaN"},
		{"negative measured age", NodeLoad{Slots: []SlotLoad{{Slot: 2, Measured: -5}}}, "measured_seconds -5: negative"},
		{"hot key out of range", NodeLoad{HotKeys: []HotKey{{Key: "k", Slot: 16384}}}, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
