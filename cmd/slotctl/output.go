package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/clusterstatus"
)

// printJSON writes v as indented JSON: the stable, documented form of -o json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(strings.Join(header, "\t"))
	return t
}

func (t *table) row(cols ...any) {
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error { return t.tw.Flush() }

// print writes v as JSON with -o json, else calls tableFn.
func (g *globals) print(v any, tableFn func(io.Writer) error) error {
	if g.output == "json" {
		return printJSON(g.stdout, v)
	}
	return tableFn(g.stdout)
}

// How plans, states and times are printed: as in a status
// (clusterstatus), everywhere.
var (
	planJSON  = clusterstatus.PlanJSON
	nodeState = clusterstatus.NodeState
	planState = clusterstatus.PlanState
	movePhase = clusterstatus.MovePhase
	timeJSON  = clusterstatus.TimeJSON
)

// enumName is a proto enum value as printed: NODE_STATE_DRAINING with
// prefix "NODE_STATE_" is "draining".
func enumName(v fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(v.String(), prefix))
}

// formatBytes prints a byte count in binary units: 0 B, 512 B, 1.5 KiB, 250.0 MiB.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// formatRate prints a throttle; 0 is no limit.
func formatRate(bps uint64) string {
	if bps == 0 {
		return "unlimited"
	}
	return formatBytes(bps) + "/s"
}

// formatDuration rounds a duration for people: 850ms, 12s, 4m10s, 4m, 2h3m.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// formatTime prints a timestamp in UTC to the second, "-" when unset.
func formatTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// orDash prints "-" for an empty column.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sortedKeys returns a map's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
