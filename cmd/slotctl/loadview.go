package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/clusterstatus"
	"github.com/slotd/slotd/load"
)

// HotKeyFlag is the RFC's threshold: a key carrying more than this share
// of one node's capacity (its fair share of the cluster's ops) is flagged.
const HotKeyFlag = 0.20

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

// hotSpotLine names the hot spots in one line, "" when none.
func hotSpotLine(hs []clusterstatus.HotSpot) string {
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
