package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

// HotKeyFlag is the RFC's threshold: a key carrying more than this share
// of one node's capacity (its fair share of the cluster's ops) is flagged.
const HotKeyFlag = 0.20

// measuredJSON is a node's measured load in `status -o json`, null while
// unknown:
//
//	{"keys": 33000, "bytes": 1572864, "reads_per_second": 120.5, "writes_per_second": 30,
//	 "ops_per_second": 150.5, "keys_ratio": 1.01, "bytes_ratio": 1.12, "ops_ratio": 0.95,
//	 "reported_at": "2026-01-02T03:04:05Z"}
//
// Rates are ~10-minute averages. A ratio is the node's load over its fair
// share (its weight over the weight of the active nodes with known load,
// times the cluster's total): 1 is balanced; absent when the node has no
// share (not active).
type measuredJSON struct {
	Keys       uint64   `json:"keys"`
	Bytes      uint64   `json:"bytes"`
	Reads      float64  `json:"reads_per_second"`
	Writes     float64  `json:"writes_per_second"`
	Ops        float64  `json:"ops_per_second"`
	KeysRatio  *float64 `json:"keys_ratio,omitempty"`
	BytesRatio *float64 `json:"bytes_ratio,omitempty"`
	OpsRatio   *float64 `json:"ops_ratio,omitempty"`
	Reported   string   `json:"reported_at"`
}

// hotSpotJSON is a slot whose load alone exceeds its node's band:
//
//	{"slot": 3330, "node": "n2", "dimension": "ops", "share": 1.33, "tag": "cart7"}
type hotSpotJSON struct {
	Slot      uint16  `json:"slot"`
	Node      string  `json:"node"`
	Dimension string  `json:"dimension"`
	Share     float64 `json:"share"`
	Tag       string  `json:"tag,omitempty"`
}

// loadView asks slotd for its load aggregate. ok is false when this slotd
// has no Load service (an older one): views then print without measured
// load.
func loadView(ctx context.Context, c *conn, withSlots bool) (v load.View, ok bool, err error) {
	resp, err := c.load.Get(ctx, &slotdv1.GetLoadRequest{Slots: withSlots})
	if status.Code(err) == codes.Unimplemented {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	return load.ViewFromProto(resp), true, nil
}

func measuredOf(n load.NodeView) *measuredJSON {
	if !n.Known {
		return nil
	}
	m := &measuredJSON{Keys: n.Keys, Bytes: n.Bytes, Reads: n.Reads10m, Writes: n.Writes10m, Ops: n.Ops(),
		Reported: n.Received.UTC().Format(time.RFC3339Nano)}
	ratio := func(d string) *float64 {
		if r, ok := n.Ratio(d); ok {
			return &r
		}
		return nil
	}
	m.KeysRatio, m.BytesRatio, m.OpsRatio = ratio(load.DimKeys), ratio(load.DimBytes), ratio(load.DimOps)
	return m
}

func hotSpotsOf(v load.View) []hotSpotJSON {
	out := []hotSpotJSON{}
	for _, h := range v.HotSpots {
		out = append(out, hotSpotJSON{Slot: h.Slot, Node: h.Node, Dimension: h.Dimension, Share: h.Share, Tag: h.Tag})
	}
	return out
}

func unknownOf(v load.View) []string {
	out := []string{}
	for _, n := range v.Nodes {
		if !n.Known {
			out = append(out, n.ID)
		}
	}
	return out
}

// hotSpotLine names the hot spots in one line, "" when none.
func hotSpotLine(hs []hotSpotJSON) string {
	if len(hs) == 0 {
		return ""
	}
	var parts []string
	for _, h := range hs {
		p := fmt.Sprintf("slot %d on %s %.0f%% of its %s share", h.Slot, h.Node, 100*h.Share, h.Dimension)
		if h.Tag != "" {
			p += " (tag {" + h.Tag + "})"
		}
		parts = append(parts, p)
	}
	return "hot spots (moving cannot fix them): " + strings.Join(parts, "; ")
}

func ratioText(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *r)
}

func rateText(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) }

// keyText prints a key for people: as is when it is printable UTF-8, else
// quoted with escapes; "..." marks a truncated key.
func keyText(s string, truncated bool) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) || r == ' ' }) {
		s = strconv.Quote(s)
	}
	if truncated {
		s += "..."
	}
	return s
}
