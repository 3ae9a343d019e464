// Package watchwire decodes the WatchMap stream's responses without
// protobuf's reflection and without allocating for the common update: a
// delta that moves slots and changes the moves in flight.
//
// Every watcher decodes every map change, and with many watchers in one
// process (slotd's propagation benchmark runs 1,000) decoding into fresh
// messages was a fifth of what a client allocated per change. A Decoder
// reuses its messages and looks the strings an update names (node ids,
// move ids) up among the ones it decoded before, so a delta that names
// known nodes allocates nothing. Anything else, a full map, a delta that
// changes the node table, a field this package does not know or bytes it
// cannot parse, goes to proto.Unmarshal, so the result is always what
// proto.Unmarshal gives (FuzzDecode).
package watchwire

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/wirefield"
)

// Frame holds one response's bytes as received. Pass a *Frame to a
// stream's RecvMsg on a call made with Codec.
type Frame struct{ B []byte }

// Codec is gRPC's proto codec, except that it receives into a *Frame by
// copying the bytes into the Frame's buffer (reused from one message to
// the next) instead of decoding them.
type Codec struct{ proto encoding.CodecV2 }

// NewCodec returns the codec, over the registered proto codec.
func NewCodec() Codec { return Codec{proto: encoding.GetCodecV2(grpcproto.Name)} }

// Marshal encodes v with the proto codec.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

// Unmarshal copies data into v's buffer when v is a *Frame, and decodes it
// with the proto codec otherwise.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*Frame)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	n := data.Len()
	if cap(f.B) < n {
		f.B = make([]byte, n)
	}
	f.B = f.B[:n]
	data.CopyTo(f.B)
	return nil
}

// Name is the proto codec's: the call's content-subtype stays "proto".
func (c Codec) Name() string { return grpcproto.Name }

// Field numbers of the messages the fast path decodes (api/slotdv1).
const (
	respDelta = 2 // WatchMapResponse.delta

	deltaFrom       = 1 // MapDelta.from_version
	deltaVersion    = 2 // MapDelta.version
	deltaSlots      = 3 // MapDelta.slots
	deltaMigrations = 6 // MapDelta.migrations

	ownerSlot = 1 // SlotOwner.slot
	ownerID   = 2 // SlotOwner.owner

	migSlot   = 1 // Migration.slot
	migFrom   = 2 // Migration.from
	migTo     = 3 // Migration.to
	migPhase  = 4 // Migration.phase
	migMoveID = 5 // Migration.move_id
)

// internLen is how many decoded strings a Decoder keeps to reuse: a
// cluster's node ids and the ids of recent moves, typically. (A lookup is
// one hash; a scan compared every kept move id, all of one length.)
const internLen = 64

// Decoder decodes WatchMap responses. The zero Decoder is ready to use; it
// is not safe for concurrent use.
type Decoder struct {
	resp  slotdv1.WatchMapResponse
	oneof slotdv1.WatchMapResponse_Delta
	delta slotdv1.MapDelta
	// slots and migs hold messages reused by later updates; a delta uses
	// a prefix of each.
	slots []*slotdv1.SlotOwner
	migs  []*slotdv1.Migration
	// strs holds strings decoded before, each its own key; it is emptied
	// when it would grow past internLen.
	strs map[string]string
}

// Decode returns the response b encodes. A response the fast path decoded
// is the Decoder's own, valid until the next call: read it, do not keep
// it (its strings may be kept: strings never change).
func (d *Decoder) Decode(b []byte) (*slotdv1.WatchMapResponse, error) {
	if r, ok := d.decodeFast(b); ok {
		return r, nil
	}
	r := new(slotdv1.WatchMapResponse)
	if err := proto.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("watch update: %w", err)
	}
	return r, nil
}

// decodeFast decodes a response holding exactly one delta of the common
// shape, reporting false for anything else.
func (d *Decoder) decodeFast(b []byte) (*slotdv1.WatchMapResponse, bool) {
	f, n := wirefield.Next(b)
	if n != len(b) || f.Num != respDelta || f.Type != protowire.BytesType {
		return nil, false // malformed, another field, or another field follows
	}
	if !d.decodeDelta(f.Body) {
		return nil, false
	}
	d.oneof.Delta = &d.delta
	d.resp.Update = &d.oneof
	return &d.resp, true
}

func (d *Decoder) decodeDelta(b []byte) bool {
	var from, version uint64
	ns, nm := 0, 0
	ok := wirefield.Each(b, func(f wirefield.Field) bool {
		switch {
		case f.Num == deltaFrom && f.Type == protowire.VarintType:
			from = f.V
		case f.Num == deltaVersion && f.Type == protowire.VarintType:
			version = f.V
		case f.Num == deltaSlots && f.Type == protowire.BytesType:
			if ns == len(d.slots) {
				d.slots = append(d.slots, new(slotdv1.SlotOwner))
			}
			ns++
			return d.decodeOwner(f.Body, d.slots[ns-1])
		case f.Num == deltaMigrations && f.Type == protowire.BytesType:
			if nm == len(d.migs) {
				d.migs = append(d.migs, new(slotdv1.Migration))
			}
			nm++
			return d.decodeMigration(f.Body, d.migs[nm-1])
		default:
			return false // node changes, or a field this package does not know
		}
		return true
	})
	if !ok {
		return false
	}
	d.delta.FromVersion, d.delta.Version = from, version
	d.delta.Slots = nil
	if ns > 0 {
		d.delta.Slots = d.slots[:ns]
	}
	d.delta.Migrations = nil
	if nm > 0 {
		d.delta.Migrations = d.migs[:nm]
	}
	return true
}

// decodeOwner decodes a SlotOwner into so, whose earlier value is only
// read (to reuse its string).
func (d *Decoder) decodeOwner(b []byte, so *slotdv1.SlotOwner) bool {
	var slot uint32
	owner := ""
	ok := wirefield.Each(b, func(f wirefield.Field) bool {
		ok := true
		switch {
		case f.Num == ownerSlot && f.Type == protowire.VarintType:
			slot = uint32(f.V)
		case f.Num == ownerID && f.Type == protowire.BytesType:
			owner, ok = d.str(f.Body, so.Owner)
		default:
			return false
		}
		return ok
	})
	if ok {
		so.Slot, so.Owner = slot, owner
	}
	return ok
}

// decodeMigration decodes a Migration into mg, whose earlier value is
// only read (to reuse its strings).
func (d *Decoder) decodeMigration(b []byte, mg *slotdv1.Migration) bool {
	var slot uint32
	var phase slotdv1.MovePhase
	from, to, id := "", "", ""
	ok := wirefield.Each(b, func(f wirefield.Field) bool {
		ok := true
		switch {
		case f.Num == migSlot && f.Type == protowire.VarintType:
			slot = uint32(f.V)
		case f.Num == migPhase && f.Type == protowire.VarintType:
			phase = slotdv1.MovePhase(int32(f.V))
		case f.Num == migFrom && f.Type == protowire.BytesType:
			from, ok = d.str(f.Body, mg.From)
		case f.Num == migTo && f.Type == protowire.BytesType:
			to, ok = d.str(f.Body, mg.To)
		case f.Num == migMoveID && f.Type == protowire.BytesType:
			id, ok = d.str(f.Body, mg.MoveId)
		default:
			return false
		}
		return ok
	})
	if ok {
		mg.Slot, mg.From, mg.To, mg.Phase, mg.MoveId = slot, from, to, phase, id
	}
	return ok
}

// str returns a string field's value v as a string decoded before when it
// has the same bytes: prev, what the reused message held in this field (a
// move's ids and nodes stay the same from its begin to its commit), or one
// from strs. ok is false for invalid UTF-8, which proto.Unmarshal reports.
func (d *Decoder) str(v []byte, prev string) (s string, ok bool) {
	if len(v) == 0 {
		return "", true
	}
	if prev == string(v) {
		return prev, true
	}
	if s, ok := d.strs[string(v)]; ok { // looks up without converting
		return s, true
	}
	if !utf8.Valid(v) {
		return "", false
	}
	if d.strs == nil {
		d.strs = make(map[string]string, internLen)
	} else if len(d.strs) >= internLen {
		clear(d.strs)
	}
	s = string(v)
	d.strs[s] = s
	return s, true
}
