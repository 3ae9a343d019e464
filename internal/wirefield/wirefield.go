// Package wirefield reads an encoded protobuf message one field at a time.
// It is the field reader of the decoders that read a few known messages in
// place instead of through proto.Unmarshal: the SDK's watch updates
// (client/internal/watchwire) and a target's snapshot imports
// (node). The mover's relay walks its export batches with
// protowire's calls inline instead: Next is not inlined, and a call per
// field is 70% of that walk (mover BenchmarkRelayScan).
package wirefield

import "google.golang.org/protobuf/encoding/protowire"

// Field is one field of a message.
type Field struct {
	Num  protowire.Number
	Type protowire.Type
	// V is a varint field's value.
	V uint64
	// Body is a length-delimited field's bytes: a view of the message,
	// not a copy.
	Body []byte
}

// Next reads the field at the start of b and returns it and its length in
// bytes, tag included; n is negative when b does not start with a whole
// field (protowire's convention). A varint or length-delimited field is
// decoded; a field of another wire type (fixed32, fixed64, a group) is
// skipped: its Num and Type are set, V and Body are zero, and callers
// that expect no such field refuse it by its Type.
func Next(b []byte) (f Field, n int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return f, n
	}
	f.Num, f.Type = num, typ
	var m int
	switch typ {
	case protowire.VarintType:
		f.V, m = protowire.ConsumeVarint(b[n:])
	case protowire.BytesType:
		f.Body, m = protowire.ConsumeBytes(b[n:])
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		return Field{}, m
	}
	return f, n + m
}

// Each calls fn with every field of b in order. It reports false when fn
// refuses one (returns false) or b does not parse.
func Each(b []byte, fn func(Field) bool) bool {
	for len(b) > 0 {
		f, n := Next(b)
		if n < 0 || !fn(f) {
			return false
		}
		b = b[n:]
	}
	return true
}
