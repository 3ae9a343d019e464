package redirect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrMalformed is returned by Parse and ParseFenced for a line that is not a
// well-formed answer.
var ErrMalformed = errors.New("redirect: malformed")

// Codes of the gRPC form. A redirect is FailedPrecondition: the request's
// precondition (this node owns the slot) does not hold, and sending it again
// unchanged fails again. A fence is Unavailable: the same request succeeds
// later.
const (
	RedirectCode = codes.FailedPrecondition
	FencedCode   = codes.Unavailable
)

// AskingKey is the gRPC metadata key that flags a request re-sent after ASK.
const AskingKey = "slotd-asking"

// MaxLine bounds the text form; no valid answer comes close to it.
const MaxLine = 512

// Kind is MOVED or ASK.
type Kind uint8

// The kinds; the zero Kind is invalid.
const (
	Moved Kind = 1
	Ask   Kind = 2
)

// String returns "MOVED" or "ASK" (the text form's first word).
func (k Kind) String() string {
	switch k {
	case Moved:
		return "MOVED"
	case Ask:
		return "ASK"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Redirect is a store node's answer that another node serves a slot. It is an
// error, so a request function can return it as is.
type Redirect struct {
	Kind Kind
	Slot slots.Slot
	// Owner is the node id of the owner or ASK target; empty when parsed from
	// the text form, which does not carry it.
	Owner string
	// Addr is host:port of the node to ask.
	Addr string
	// Version is the directory version of the answering node's map.
	Version uint64
}

// String returns the text form, e.g. "MOVED 4546 10.0.0.7:7500 42".
func (r Redirect) String() string { return string(r.AppendText(nil)) }

// Error makes a Redirect an error; the message is the text form.
func (r Redirect) Error() string { return r.String() }

// AppendText appends the text form to dst, for stores that write replies
// without allocating.
func (r Redirect) AppendText(dst []byte) []byte {
	dst = append(dst, r.Kind.String()...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(r.Slot.Uint16()), 10)
	dst = append(dst, ' ')
	dst = append(dst, r.Addr...)
	dst = append(dst, ' ')
	return strconv.AppendUint(dst, r.Version, 10)
}

// Parse parses the text form "MOVED|ASK <slot> <address> <version>". One
// trailing "\n" or "\r\n" is ignored; anything else out of place is
// ErrMalformed.
func Parse(line string) (Redirect, error) {
	f, err := fields(line, 4)
	if err != nil {
		return Redirect{}, err
	}
	var r Redirect
	switch f[0] {
	case "MOVED":
		r.Kind = Moved
	case "ASK":
		r.Kind = Ask
	default:
		return Redirect{}, fmt.Errorf("%w: %q: first word must be MOVED or ASK", ErrMalformed, clip(line))
	}
	if r.Slot, err = parseSlot(f[1]); err != nil {
		return Redirect{}, fmt.Errorf("%w: %q: %v", ErrMalformed, clip(line), err)
	}
	if err := checkAddr(f[2]); err != nil {
		return Redirect{}, fmt.Errorf("%w: %q: %v", ErrMalformed, clip(line), err)
	}
	r.Addr = f[2]
	if r.Version, err = parseUint(f[3]); err != nil {
		return Redirect{}, fmt.Errorf("%w: %q: version: %v", ErrMalformed, clip(line), err)
	}
	return r, nil
}

// Proto converts r to its wire message.
func (r Redirect) Proto() *slotdv1.Redirect {
	k := slotdv1.RedirectKind_REDIRECT_KIND_MOVED
	if r.Kind == Ask {
		k = slotdv1.RedirectKind_REDIRECT_KIND_ASK
	}
	return &slotdv1.Redirect{Kind: k, Slot: uint32(r.Slot.Uint16()), Owner: r.Owner, Address: r.Addr, Version: r.Version}
}

// FromProto validates and converts a wire message.
func FromProto(p *slotdv1.Redirect) (Redirect, error) {
	var r Redirect
	switch p.GetKind() {
	case slotdv1.RedirectKind_REDIRECT_KIND_MOVED:
		r.Kind = Moved
	case slotdv1.RedirectKind_REDIRECT_KIND_ASK:
		r.Kind = Ask
	default:
		return Redirect{}, fmt.Errorf("%w: kind %v", ErrMalformed, p.GetKind())
	}
	s, err := slots.New(int(p.GetSlot()))
	if err != nil {
		return Redirect{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkAddr(p.GetAddress()); err != nil {
		return Redirect{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	r.Slot, r.Owner, r.Addr, r.Version = s, p.GetOwner(), p.GetAddress(), p.GetVersion()
	return r, nil
}

// Status returns the gRPC form: code FailedPrecondition, the text form as
// message, and the Redirect message as a detail.
func (r Redirect) Status() *status.Status {
	st, err := status.New(RedirectCode, r.String()).WithDetails(r.Proto())
	if err != nil { // only if the detail cannot be marshalled, which a valid message always can
		panic(fmt.Sprintf("redirect: attach detail: %v", err))
	}
	return st
}

// Err returns the gRPC form as an error for a gRPC handler to return.
func (r Redirect) Err() error { return r.Status().Err() }

// FromError finds a redirect in err: a Redirect or *Redirect in its chain, or
// a gRPC status carrying a slotd.v1.Redirect detail. A status whose detail is
// invalid is not a redirect.
func FromError(err error) (Redirect, bool) {
	if err == nil {
		return Redirect{}, false
	}
	var r Redirect
	if errors.As(err, &r) {
		return r, true
	}
	var rp *Redirect
	if errors.As(err, &rp) && rp != nil {
		return *rp, true
	}
	st, ok := status.FromError(err)
	if !ok {
		return Redirect{}, false
	}
	for _, d := range st.Details() {
		if p, ok := d.(*slotdv1.Redirect); ok {
			r, err := FromProto(p)
			return r, err == nil
		}
	}
	return Redirect{}, false
}

// Fenced is a store node's answer that a slot is fenced for the last step of
// a move: retry after RetryAfter.
type Fenced struct {
	Slot    slots.Slot
	Version uint64
	MoveID  string
	// RetryAfter is the suggested delay; zero when unknown (text form).
	RetryAfter time.Duration
}

// String returns the text form "FENCED <slot> <version>".
func (f Fenced) String() string {
	return "FENCED " + strconv.Itoa(f.Slot.Int()) + " " + strconv.FormatUint(f.Version, 10)
}

// Error makes Fenced an error; the message is the text form.
func (f Fenced) Error() string { return f.String() }

// ParseFenced parses the text form "FENCED <slot> <version>".
func ParseFenced(line string) (Fenced, error) {
	f, err := fields(line, 3)
	if err != nil {
		return Fenced{}, err
	}
	if f[0] != "FENCED" {
		return Fenced{}, fmt.Errorf("%w: %q: first word must be FENCED", ErrMalformed, clip(line))
	}
	var fe Fenced
	if fe.Slot, err = parseSlot(f[1]); err != nil {
		return Fenced{}, fmt.Errorf("%w: %q: %v", ErrMalformed, clip(line), err)
	}
	if fe.Version, err = parseUint(f[2]); err != nil {
		return Fenced{}, fmt.Errorf("%w: %q: version: %v", ErrMalformed, clip(line), err)
	}
	return fe, nil
}

// Status returns the gRPC form: code Unavailable with a google.rpc.RetryInfo
// detail (when RetryAfter > 0) and a slotd.v1.Fenced detail.
func (f Fenced) Status() *status.Status {
	details := []protoadapt.MessageV1{&slotdv1.Fenced{Slot: uint32(f.Slot.Uint16()), Version: f.Version, MoveId: f.MoveID}}
	if f.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(f.RetryAfter)})
	}
	st, err := status.New(FencedCode, f.String()).WithDetails(details...)
	if err != nil {
		panic(fmt.Sprintf("redirect: attach detail: %v", err))
	}
	return st
}

// Err returns the gRPC form as an error.
func (f Fenced) Err() error { return f.Status().Err() }

// FencedFromError finds a fence answer in err: a Fenced in its chain, or a
// gRPC status carrying a slotd.v1.Fenced detail.
func FencedFromError(err error) (Fenced, bool) {
	if err == nil {
		return Fenced{}, false
	}
	var f Fenced
	if errors.As(err, &f) {
		return f, true
	}
	st, ok := status.FromError(err)
	if !ok {
		return Fenced{}, false
	}
	found := false
	for _, d := range st.Details() {
		switch p := d.(type) {
		case *slotdv1.Fenced:
			s, err := slots.New(int(p.GetSlot()))
			if err != nil {
				return Fenced{}, false
			}
			f.Slot, f.Version, f.MoveID, found = s, p.GetVersion(), p.GetMoveId(), true
		case *errdetails.RetryInfo:
			if d := p.GetRetryDelay(); d.IsValid() && d.AsDuration() > 0 {
				f.RetryAfter = d.AsDuration()
			}
		}
	}
	return f, found
}

// WithAsking returns ctx with outgoing gRPC metadata flagging the request as
// re-sent after ASK.
func WithAsking(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, AskingKey, "1")
}

// IsAsking reports whether an incoming gRPC request is flagged as asking.
func IsAsking(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, AskingKey)
	return len(v) > 0 && v[0] == "1"
}

// fields splits a line into exactly n fields separated by single spaces.
func fields(line string, n int) ([]string, error) {
	if len(line) > MaxLine {
		return nil, fmt.Errorf("%w: line of %d bytes, limit %d", ErrMalformed, len(line), MaxLine)
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	f := strings.Split(line, " ")
	if len(f) != n {
		return nil, fmt.Errorf("%w: %q: want %d space-separated fields", ErrMalformed, clip(line), n)
	}
	return f, nil
}

// parseSlot accepts plain decimal digits only (no sign, no spaces).
func parseSlot(s string) (slots.Slot, error) {
	n, err := parseUint(s)
	if err != nil {
		return slots.Slot{}, fmt.Errorf("slot: %v", err)
	}
	if n >= slots.Count {
		return slots.Slot{}, fmt.Errorf("slot %d is not in 0-%d", n, slots.Count-1)
	}
	return slots.MustNew(int(n)), nil
}

func parseUint(s string) (uint64, error) {
	if s == "" || len(s) > 20 {
		return 0, errors.New("want 1 to 20 decimal digits")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("want decimal digits")
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// checkAddr requires host:port with a non-empty host of printable ASCII
// without spaces, and a port in 1-65535.
func checkAddr(a string) error {
	for i := 0; i < len(a); i++ {
		if a[i] <= ' ' || a[i] >= 0x7f {
			return fmt.Errorf("address %q: want printable ASCII without spaces", clip(a))
		}
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("address %q: want host:port", clip(a))
	}
	if host == "" {
		return fmt.Errorf("address %q: empty host", clip(a))
	}
	p, err := parseUint(port)
	if err != nil || p == 0 || p > 65535 {
		return fmt.Errorf("address %q: port must be 1-65535", clip(a))
	}
	return nil
}

// clip keeps error messages one short line whatever the input.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
