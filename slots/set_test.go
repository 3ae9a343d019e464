package slots

import (
	"errors"
	"strings"
	"testing"
)

func TestSetBasics(t *testing.T) {
	var s Set
	if s.Count() != 0 || s.String() != "" {
		t.Fatalf("zero set not empty: %d %q", s.Count(), s.String())
	}
	for _, n := range []int{0, 1, 2, 63, 64, 65, 16383, 7000} {
		s.Add(MustNew(n))
	}
	if got, want := s.String(), "0-2,63-65,7000,16383"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if s.Count() != 8 || !s.Contains(MustNew(64)) || s.Contains(MustNew(3)) {
		t.Fatalf("count/contains wrong: %d", s.Count())
	}
	s.Remove(MustNew(64))
	if got, want := s.String(), "0-2,63,65,7000,16383"; got != want {
		t.Fatalf("after remove String = %q, want %q", got, want)
	}
	prev := -1
	for x := range s.All() {
		if x.Int() <= prev {
			t.Fatalf("All not increasing: %d after %d", x.Int(), prev)
		}
		prev = x.Int()
	}
}

func TestParseSet(t *testing.T) {
	cases := []struct {
		in, want string
		bad      string // substring the error must quote
	}{
		{in: "0-5460,5461,7000-7010", want: "0-5461,7000-7010"},
		{in: "0-16383", want: "0-16383"},
		{in: " 5 , 7 ", want: "5,7"},
		{in: "16383", want: "16383"},
		{in: "", bad: "empty"},
		{in: "  ", bad: "empty"},
		{in: "1,,2", bad: "empty item"},
		{in: "1,", bad: "empty item"},
		{in: "16384", bad: `"16384"`},
		{in: "0-99999", bad: `"0-99999"`},
		{in: "10-5", bad: `"10-5" is reversed`},
		{in: "-5", bad: `"-5"`},
		{in: "1-2-3", bad: `"1-2-3"`},
		{in: "a", bad: `"a"`},
		{in: "+1", bad: `"+1"`},
		{in: "0x10", bad: `"0x10"`},
		{in: "1 2", bad: `"1 2"`},
		{in: "0-10,5-15", bad: `"5-15" overlaps`},
		{in: "3,3", bad: `"3" overlaps`},
		{in: "99999999999999999999", bad: "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			s, err := ParseSet(tc.in)
			if tc.bad != "" {
				if err == nil || !errors.Is(err, ErrBadRange) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("ParseSet(%q) err = %v, want ErrBadRange quoting %q", tc.in, err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSet(%q): %v", tc.in, err)
			}
			if got := s.String(); got != tc.want {
				t.Fatalf("ParseSet(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzParseSet(f *testing.F) {
	for _, s := range []string{"0-5460,5461,7000-7010", "", "1,,2", "10-5", "16383", "0-16383", "1-2-3", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSet(in)
		if err != nil {
			if !errors.Is(err, ErrBadRange) {
				t.Fatalf("error not ErrBadRange: %v", err)
			}
			return
		}
		// Round trip: the canonical form parses back to the same set.
		out := s.String()
		back, err := ParseSet(out)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", out, in, err)
		}
		if back != s || back.String() != out {
			t.Fatalf("round trip of %q: %q -> %q", in, out, back.String())
		}
	})
}

func BenchmarkSetString(b *testing.B) {
	var s Set
	for n := 0; n < Count; n += 3 {
		s.Add(MustNew(n))
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.String()
	}
}
