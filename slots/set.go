package slots

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// ErrBadRange is returned by ParseSet for input that is not range notation.
var ErrBadRange = errors.New("slots: bad slot range")

const words = Count / 64

// Set is a set of slots, as a 2 KiB bitset. The zero value is empty and
// ready to use. A Set is not safe for concurrent mutation.
type Set struct{ w [words]uint64 }

// Add puts s in the set.
func (x *Set) Add(s Slot) { x.w[s.n>>6] |= 1 << (s.n & 63) }

// Remove takes s out of the set.
func (x *Set) Remove(s Slot) { x.w[s.n>>6] &^= 1 << (s.n & 63) }

// Contains reports whether s is in the set.
func (x *Set) Contains(s Slot) bool { return x.w[s.n>>6]&(1<<(s.n&63)) != 0 }

// AddRange adds every slot from lo to hi, both included. It does nothing when
// lo > hi.
func (x *Set) AddRange(lo, hi Slot) {
	for n := int(lo.n); n <= int(hi.n); n++ {
		x.w[n>>6] |= 1 << (uint(n) & 63)
	}
}

// Count returns the number of slots in the set.
func (x *Set) Count() int {
	c := 0
	for _, w := range x.w {
		c += bits.OnesCount64(w)
	}
	return c
}

// All yields the slots of the set in increasing order.
func (x *Set) All() iter.Seq[Slot] {
	return func(yield func(Slot) bool) {
		for i, w := range x.w {
			for w != 0 {
				b := bits.TrailingZeros64(w)
				if !yield(Slot{uint16(i*64 + b)}) {
					return
				}
				w &= w - 1
			}
		}
	}
}

// Range is a run of consecutive slots, From to To, both included.
type Range struct{ From, To Slot }

// String formats the range as "from-to", or "from" for a single slot.
func (r Range) String() string { return string(r.appendTo(nil)) }

func (r Range) appendTo(b []byte) []byte {
	b = strconv.AppendInt(b, int64(r.From.n), 10)
	if r.From != r.To {
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(r.To.n), 10)
	}
	return b
}

// Ranges returns the set as maximal runs of consecutive slots, in order.
func (x *Set) Ranges() []Range {
	var out []Range
	for s := range x.All() {
		if n := len(out); n > 0 && out[n-1].To.n+1 == s.n {
			out[n-1].To = s
			continue
		}
		out = append(out, Range{s, s})
	}
	return out
}

// String formats the set in range notation, "0-5460,5461-5470,7000", the form
// ParseSet reads. The empty set is "".
func (x *Set) String() string {
	var b []byte
	for i, r := range x.Ranges() {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.appendTo(b)
	}
	return string(b)
}

// ParseSet reads range notation: comma-separated slots and "lo-hi" ranges,
// "0-5460,5461,7000-7010". It rejects empty input, empty items, numbers out of
// range, reversed ranges and items that overlap an earlier one, quoting the
// bad part. Spaces around items are allowed.
func ParseSet(s string) (Set, error) {
	var set Set
	if strings.TrimSpace(s) == "" {
		return set, fmt.Errorf("%w: empty; want slots like \"0-5460,7000\"", ErrBadRange)
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi, err := parseItem(item)
		if err != nil {
			return Set{}, err
		}
		for n := lo; n <= hi; n++ {
			if set.Contains(Slot{uint16(n)}) {
				return Set{}, fmt.Errorf("%w: %q overlaps an earlier item (slot %d)", ErrBadRange, item, n)
			}
		}
		set.AddRange(Slot{uint16(lo)}, Slot{uint16(hi)})
	}
	return set, nil
}

func parseItem(item string) (lo, hi int, err error) {
	if item == "" {
		return 0, 0, fmt.Errorf("%w: empty item; remove the extra comma", ErrBadRange)
	}
	a, b, isRange := strings.Cut(item, "-")
	lo, err = parseNum(item, a)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err = parseNum(item, b)
	if err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("%w: %q is reversed; write %d-%d", ErrBadRange, item, hi, lo)
	}
	return lo, hi, nil
}

func parseNum(item, s string) (int, error) {
	// Digits only: no sign, no spaces inside, no base prefixes.
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %q is not a slot or a range lo-hi", ErrBadRange, item)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n >= Count {
		return 0, fmt.Errorf("%w: %q: %d is out of range 0-%d", ErrBadRange, item, n, Count-1)
	}
	return n, nil
}
