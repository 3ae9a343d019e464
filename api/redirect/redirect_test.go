package redirect

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Redirect
		ok   bool
	}{
		{"moved", "MOVED 4546 10.0.0.7:7500 42", Redirect{Kind: Moved, Slot: slots.MustNew(4546), Addr: "10.0.0.7:7500", Version: 42}, true},
		{"ask", "ASK 0 node-a.example:1 1", Redirect{Kind: Ask, Slot: slots.MustNew(0), Addr: "node-a.example:1", Version: 1}, true},
		{"last slot", "MOVED 16383 h:65535 18446744073709551615", Redirect{Kind: Moved, Slot: slots.MustNew(16383), Addr: "h:65535", Version: 1<<64 - 1}, true},
		{"ipv6", "ASK 7 [::1]:7000 3", Redirect{Kind: Ask, Slot: slots.MustNew(7), Addr: "[::1]:7000", Version: 3}, true},
		{"crlf", "MOVED 1 h:1 2\r\n", Redirect{Kind: Moved, Slot: slots.MustNew(1), Addr: "h:1", Version: 2}, true},
		{"lf", "MOVED 1 h:1 2\n", Redirect{Kind: Moved, Slot: slots.MustNew(1), Addr: "h:1", Version: 2}, true},
		{"slot out of range", "MOVED 16384 h:1 2", Redirect{}, false},
		{"slot 99999", "MOVED 99999 h:1 2", Redirect{}, false},
		{"negative slot", "MOVED -1 h:1 2", Redirect{}, false},
		{"plus sign", "MOVED +1 h:1 2", Redirect{}, false},
		{"lower case", "moved 1 h:1 2", Redirect{}, false},
		{"redis form without version", "MOVED 1 h:1", Redirect{}, false},
		{"extra field", "MOVED 1 h:1 2 3", Redirect{}, false},
		{"double space", "MOVED  1 h:1 2", Redirect{}, false},
		{"leading space", " MOVED 1 h:1 2", Redirect{}, false},
		{"tab", "MOVED\t1 h:1 2", Redirect{}, false},
		{"no port", "MOVED 1 host 2", Redirect{}, false},
		{"port 0", "MOVED 1 h:0 2", Redirect{}, false},
		{"port too big", "MOVED 1 h:65536 2", Redirect{}, false},
		{"empty host", "MOVED 1 :7000 2", Redirect{}, false},
		{"version overflow", "MOVED 1 h:1 18446744073709551616", Redirect{}, false},
		{"version hex", "MOVED 1 h:1 0x2", Redirect{}, false},
		{"fenced is not a redirect", "FENCED 1 2", Redirect{}, false},
		{"empty", "", Redirect{}, false},
		{"control byte in address", "MOVED 1 h\x00:1 2", Redirect{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			if tc.ok != (err == nil) {
				t.Fatalf("Parse(%q) error = %v, want ok=%v", tc.line, err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Parse(%q) error %v is not ErrMalformed", tc.line, err)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.line, got, tc.want)
			}
		})
	}
}

func TestTextRoundTrip(t *testing.T) {
	r := Redirect{Kind: Ask, Slot: slots.MustNew(12000), Addr: "127.0.0.1:7501", Version: 99}
	if got, want := r.String(), "ASK 12000 127.0.0.1:7501 99"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	back, err := Parse(r.String())
	if err != nil || back != r {
		t.Fatalf("Parse(String()) = %+v, %v; want %+v", back, err, r)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	r := Redirect{Kind: Moved, Slot: slots.MustNew(5), Owner: "n2", Addr: "127.0.0.1:7502", Version: 7}
	err := r.Err()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "MOVED 5 127.0.0.1:7502 7" {
		t.Fatalf("status = %v %q", st.Code(), st.Message())
	}
	got, ok := FromError(fmt.Errorf("get: %w", err))
	if !ok || got != r {
		t.Fatalf("FromError = %+v, %v; want %+v", got, ok, r)
	}
	// A Go value in the chain is found too (stores that do not use gRPC).
	if got, ok := FromError(fmt.Errorf("get: %w", r)); !ok || got != r {
		t.Fatalf("FromError(wrapped value) = %+v, %v", got, ok)
	}
	if _, ok := FromError(status.Error(codes.FailedPrecondition, "MOVED 5 h:1 7")); ok {
		t.Fatal("a status without a Redirect detail must not count as a redirect")
	}
	bad, _ := status.New(codes.FailedPrecondition, "x").WithDetails(&slotdv1.Redirect{Kind: slotdv1.RedirectKind_REDIRECT_KIND_MOVED, Slot: 99999, Address: "h:1"})
	if _, ok := FromError(bad.Err()); ok {
		t.Fatal("a detail with slot 99999 must not count as a redirect")
	}
	if _, ok := FromError(nil); ok {
		t.Fatal("nil is not a redirect")
	}
}

func TestFenced(t *testing.T) {
	f := Fenced{Slot: slots.MustNew(9), Version: 12, MoveID: "m1", RetryAfter: 20 * time.Millisecond}
	err := f.Err()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code = %v, want Unavailable", status.Code(err))
	}
	got, ok := FencedFromError(err)
	if !ok || got != f {
		t.Fatalf("FencedFromError = %+v, %v; want %+v", got, ok, f)
	}
	if _, ok := FromError(err); ok {
		t.Fatal("a fence is not a redirect")
	}
	p, err := ParseFenced("FENCED 9 12")
	if err != nil || p.Slot.Int() != 9 || p.Version != 12 {
		t.Fatalf("ParseFenced = %+v, %v", p, err)
	}
	for _, bad := range []string{"FENCED 9", "FENCED 16384 1", "MOVED 9 12", "FENCED 9 12 x"} {
		if _, err := ParseFenced(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseFenced(%q) error = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestAsking(t *testing.T) {
	ctx := WithAsking(context.Background())
	md, _ := metadata.FromOutgoingContext(ctx)
	in := metadata.NewIncomingContext(context.Background(), md)
	if !IsAsking(in) {
		t.Fatal("IsAsking = false after WithAsking")
	}
	if IsAsking(context.Background()) {
		t.Fatal("IsAsking = true without the flag")
	}
}

// FuzzParse checks that Parse never panics, rejects with ErrMalformed, and
// that whatever it accepts survives a format/parse round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"MOVED 4546 10.0.0.7:7500 42", "ASK 0 h:1 0", "MOVED 16383 [::1]:65535 18446744073709551615\r\n",
		"MOVED 16384 h:1 1", "ASK 01 h:1 01", "FENCED 1 2", "MOVED 1 :1 1", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := Parse(line)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) error %v is not ErrMalformed", line, err)
			}
			return
		}
		back, err := Parse(r.String())
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v, %v", line, r, r.String(), back, err)
		}
		if got, ok := FromError(r.Err()); !ok || got != r {
			t.Fatalf("status round trip of %+v = %+v, %v", r, got, ok)
		}
	})
}

func FuzzParseFenced(f *testing.F) {
	for _, s := range []string{"FENCED 1 2", "FENCED 16383 0\n", "FENCED 16384 1", "FENCED a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fe, err := ParseFenced(line)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseFenced(%q) error %v is not ErrMalformed", line, err)
			}
			return
		}
		back, err := ParseFenced(fe.String())
		if err != nil || back != fe {
			t.Fatalf("round trip of %q: %+v -> %+v, %v", line, fe, back, err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("MOVED 4546 10.0.0.7:7500 42"); err != nil {
			b.Fatal(err)
		}
	}
}
