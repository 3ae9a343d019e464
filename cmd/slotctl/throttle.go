package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newThrottleCmd) }

// throttleJSON is `slotctl throttle -o json`, before (no argument) or after
// a change:
//
//	{"bytes_per_second": 52428800, "rate": "50.0 MiB/s"}
//
// 0 bytes per second is no limit (rate "unlimited").
type throttleJSON struct {
	BytesPerSecond uint64 `json:"bytes_per_second"`
	Rate           string `json:"rate"`
}

// maxRate is the largest throttle slotd takes.
const maxRate = 1 << 62

var rateUnits = map[string]float64{
	"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}

// parseRate reads a copy rate per second: a number and a unit (B, KB, MB,
// GB, KiB, MiB, GiB), with or without "/s": "50MiB/s", "1.5 GB/s",
// "1048576" (bytes). "0" and "unlimited" are no limit. Units are case
// sensitive because "Mb" (bits) is a classic factor-8 mistake.
func parseRate(s string) (uint64, error) {
	const hint = "give a rate like 50MiB/s (units B, KB, MB, GB, KiB, MiB, GiB per second), a number of bytes per second, or unlimited"
	in := strings.TrimSpace(s)
	if in == "unlimited" {
		return 0, nil
	}
	body := strings.TrimSuffix(in, "/s")
	i := strings.IndexFunc(body, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := body, "B"
	if i >= 0 {
		num, unit = body[:i], strings.TrimSpace(body[i:])
	}
	if num == "" {
		return 0, usagef("rate %q has no number; %s", s, hint)
	}
	mult, ok := rateUnits[unit]
	if !ok {
		lower := strings.ToLower(unit)
		if unit == "b" || strings.HasSuffix(lower, "bps") || strings.HasSuffix(lower, "bit") || strings.HasSuffix(lower, "bits") ||
			len(unit) == 2 && strings.HasSuffix(unit, "b") {
			return 0, usagef("rate %q: %q looks like bits; slotd throttles bytes (e.g. MB/s or MiB/s); %s", s, unit, hint)
		}
		for u := range rateUnits {
			if strings.EqualFold(u, unit) {
				return 0, usagef("rate %q: unknown unit %q (units are case sensitive: did you mean %s?); %s", s, unit, u, hint)
			}
		}
		return 0, usagef("rate %q: unknown unit %q; %s", s, unit, hint)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, usagef("rate %q: %q is not a number; %s", s, num, hint)
	}
	bps := v * mult
	if bps > maxRate {
		return 0, usagef("rate %q is too large (at most %d bytes/s); for no limit say unlimited", s, uint64(maxRate))
	}
	if bps > 0 && bps < 1 {
		return 0, usagef("rate %q is less than 1 byte/s; for no limit say unlimited", s)
	}
	return uint64(bps), nil
}

func newThrottleCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "throttle [RATE]",
		Short: "Show or set the copy rate per donor node (applies to moves in flight within a second)",
		Example: `  slotctl throttle
  slotctl throttle 50MiB/s
  slotctl throttle unlimited`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rate uint64
			if len(args) == 1 {
				var err error
				if rate, err = parseRate(args[0]); err != nil {
					return err
				}
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				var cur *slotdv1.Throttle
				if len(args) == 0 {
					st, err := c.admin.Status(cctx, &slotdv1.StatusRequest{})
					if err != nil {
						return err
					}
					cur = st.GetThrottle()
				} else {
					resp, err := c.admin.SetThrottle(cctx, &slotdv1.SetThrottleRequest{BytesPerSecond: rate, Operator: g.operator})
					if err != nil {
						return err
					}
					cur = resp.GetThrottle()
				}
				out := throttleJSON{BytesPerSecond: cur.GetDefaultBytesPerSecond(), Rate: formatRate(cur.GetDefaultBytesPerSecond())}
				return g.print(out, func(w io.Writer) error {
					verb := "throttle is"
					if len(args) == 1 {
						verb = "throttle set to"
					}
					_, err := fmt.Fprintf(w, "%s %s per donor node\n", verb, out.Rate)
					return err
				})
			})
		},
	}
}
