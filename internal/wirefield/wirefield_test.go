package wirefield

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestNext(t *testing.T) {
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	varint := protowire.AppendVarint(tag(1, protowire.VarintType), 300)
	body := protowire.AppendBytes(tag(2, protowire.BytesType), []byte("key"))
	fixed64 := protowire.AppendFixed64(tag(3, protowire.Fixed64Type), 7)
	fixed32 := protowire.AppendFixed32(tag(4, protowire.Fixed32Type), 7)
	group := protowire.AppendTag(append(tag(5, protowire.StartGroupType), varint...), 5, protowire.EndGroupType)
	cases := []struct {
		name string
		in   []byte
		want Field
		n    int // -1: refused
	}{
		{"varint", varint, Field{Num: 1, Type: protowire.VarintType, V: 300}, len(varint)},
		{"bytes", body, Field{Num: 2, Type: protowire.BytesType, Body: []byte("key")}, len(body)},
		{"empty bytes", protowire.AppendBytes(tag(2, protowire.BytesType), nil), Field{Num: 2, Type: protowire.BytesType, Body: []byte{}}, 2},
		{"fixed64 skipped", fixed64, Field{Num: 3, Type: protowire.Fixed64Type}, len(fixed64)},
		{"fixed32 skipped", fixed32, Field{Num: 4, Type: protowire.Fixed32Type}, len(fixed32)},
		{"group skipped", group, Field{Num: 5, Type: protowire.StartGroupType}, len(group)},
		{"only the first field", append(append([]byte{}, varint...), body...), Field{Num: 1, Type: protowire.VarintType, V: 300}, len(varint)},
		{"empty", nil, Field{}, -1},
		{"bad tag", []byte{0x80}, Field{}, -1},
		{"field number 0", protowire.AppendVarint(tag(0, protowire.VarintType), 1), Field{}, -1},
		{"truncated varint", varint[:len(varint)-1], Field{}, -1},
		{"truncated bytes", body[:len(body)-1], Field{}, -1},
		{"truncated fixed64", fixed64[:len(fixed64)-1], Field{}, -1},
		{"end group alone", tag(5, protowire.EndGroupType), Field{}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, n := Next(tc.in)
			if tc.n < 0 {
				if n >= 0 {
					t.Fatalf("Next = %+v, %d; want refused", f, n)
				}
				return
			}
			if n != tc.n || f.Num != tc.want.Num || f.Type != tc.want.Type || f.V != tc.want.V || !bytes.Equal(f.Body, tc.want.Body) || (f.Body == nil) != (tc.want.Body == nil) {
				t.Fatalf("Next = %+v, %d; want %+v, %d", f, n, tc.want, tc.n)
			}
		})
	}
}

// TestNextBodyIsView: a length-delimited field's body is the message's own
// bytes, not a copy.
func TestNextBodyIsView(t *testing.T) {
	b := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("key"))
	f, _ := Next(b)
	b[len(b)-1] = 'X'
	if string(f.Body) != "keX" {
		t.Fatalf("Body = %q after the message changed, want a view (keX)", f.Body)
	}
}

func TestEach(t *testing.T) {
	var msg []byte
	for i := range 5 {
		msg = protowire.AppendVarint(protowire.AppendTag(msg, protowire.Number(i+1), protowire.VarintType), uint64(i))
	}
	cases := []struct {
		name   string
		in     []byte
		refuse protowire.Number // fn refuses this field; 0: none
		want   bool
		seen   int
	}{
		{"every field", msg, 0, true, 5},
		{"empty message", nil, 0, true, 0},
		{"fn refuses the third", msg, 3, false, 3},
		{"malformed tail", append(append([]byte{}, msg...), 0x80), 0, false, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := 0
			ok := Each(tc.in, func(f Field) bool {
				seen++
				if f.V != uint64(f.Num-1) {
					t.Errorf("field %d has value %d", f.Num, f.V)
				}
				return f.Num != tc.refuse
			})
			if ok != tc.want || seen != tc.seen {
				t.Fatalf("Each = %v after %d fields, want %v after %d", ok, seen, tc.want, tc.seen)
			}
		})
	}
}
