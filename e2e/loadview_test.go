package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// storeBytes asks the stores of ids for their slot stats (what a plan asks
// them) and sums, per node, the bytes (keys and values) of the slots it
// owns in m: a copy it still holds of a slot it gave away is not its data.
func (c *cluster) storeBytes(m *slotmap.Map, ids []string) map[string]int64 {
	c.t.Helper()
	out := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		n, ok := m.Node(id)
		if !ok {
			c.t.Fatalf("%s is not in the map at version %d", id, m.Version())
		}
		wg.Go(func() {
			r, err := slotdv1.NewStoreClient(c.conn(n.Addr)).SlotStats(c.ctx(), &slotdv1.SlotStatsRequest{})
			if err != nil {
				c.t.Errorf("slot stats of %s: %v", id, err)
				return
			}
			var sum int64
			for _, st := range r.GetSlots() {
				if m.OwnerID(slots.MustNew(int(st.GetSlot()))) == id {
					sum += int64(st.GetBytes())
				}
			}
			mu.Lock()
			out[id] = sum
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func meanBytes(bs map[string]int64) float64 {
	var sum float64
	for _, b := range bs {
		sum += float64(b)
	}
	return sum / float64(len(bs))
}

// bytesText prints bytes per node, each over the mean, and the mean.
func bytesText(bs map[string]int64) string {
	m := meanBytes(bs)
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(bs)) {
		fmt.Fprintf(&b, "%s %.2f MB (%.3f of the mean), ", id, float64(bs[id])/1e6, float64(bs[id])/m)
	}
	fmt.Fprintf(&b, "mean %.2f MB", m/1e6)
	return b.String()
}

func ratiosText(rs map[string]float64) string {
	var parts []string
	for _, id := range firstMinuteIDs {
		if r, ok := rs[id]; ok {
			parts = append(parts, fmt.Sprintf("%s %.3f", id, r))
		} else {
			parts = append(parts, id+" ?")
		}
	}
	return strings.Join(parts, " ")
}

// loadView reads the Load API's view of every node from a slotd.
func (c *cluster) loadView() (*slotdv1.GetLoadResponse, error) {
	return slotdv1.NewLoadClient(c.anyConn()).Get(c.ctx(), &slotdv1.GetLoadRequest{})
}

// viewRatios are the view's bytes and ops ratios (load over fair share) of
// the known nodes; the error names a node of ids that is unknown.
func viewRatios(v *slotdv1.GetLoadResponse, ids []string) (bytes, ops map[string]float64, err error) {
	bytes, ops = map[string]float64{}, map[string]float64{}
	for _, n := range v.GetNodes() {
		if n.GetKnown() && n.GetFairBytes() > 0 {
			bytes[n.GetNodeId()] = float64(n.GetBytes()) / n.GetFairBytes()
		}
		if n.GetKnown() && n.GetFairOps() > 0 {
			ops[n.GetNodeId()] = (n.GetReads_10M() + n.GetWrites_10M()) / n.GetFairOps()
		}
	}
	for _, id := range ids {
		if _, ok := bytes[id]; !ok {
			return bytes, ops, fmt.Errorf("%s unknown in the load view", id)
		}
	}
	return bytes, ops, nil
}

// reportsText says what the load reports held: bytes per node and how old.
func reportsText(v *slotdv1.GetLoadResponse) string {
	var parts []string
	for _, n := range v.GetNodes() {
		age := "never reported"
		if n.GetReported().GetSeconds() > 0 {
			age = fmt.Sprintf("reported %v before", v.GetNow().AsTime().Sub(n.GetReported().AsTime()).Round(time.Millisecond))
		}
		parts = append(parts, fmt.Sprintf("%s %.2f MB (known %v, %s)", n.GetNodeId(), float64(n.GetBytes())/1e6, n.GetKnown(), age))
	}
	return strings.Join(parts, ", ")
}

// statusRatios are the bytes ratios `slotctl status -o json` prints.
func (c *cluster) statusRatios() (map[string]float64, error) {
	out, errOut, code := c.slotctl("status", "-o", "json")
	if code != 0 {
		return nil, fmt.Errorf("slotctl status: exit %d: %s%s", code, out, errOut)
	}
	var st struct {
		Nodes []struct {
			ID       string `json:"id"`
			Measured *struct {
				BytesRatio *float64 `json:"bytes_ratio"`
			} `json:"measured"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("slotctl status -o json: %v: %s", err, out)
	}
	rs := map[string]float64{}
	for _, n := range st.Nodes {
		if n.Measured != nil && n.Measured.BytesRatio != nil {
			rs[n.ID] = *n.Measured.BytesRatio
		}
	}
	return rs, nil
}

// slotctlPlan runs a slotctl command that prints a plan (-o json) and
// returns the plan.
func (c *cluster) slotctlPlan(timeout time.Duration, args ...string) *slotdv1.Plan {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, errOut, code := c.h.Run(ctx, "slotctl", nil, append([]string{"--endpoints", strings.Join(c.slotdEP, ","), "--operator", "e2e"}, args...)...)
	if code != 0 {
		c.t.Fatalf("slotctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	p := &slotdv1.Plan{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(out), p); err != nil {
		c.t.Fatalf("slotctl %s: not a plan: %v\n%s", strings.Join(args, " "), err, out)
	}
	return p
}

// planText is what the logs say of a plan: moves, bytes, mode, note, and
// each node before and after.
func planText(p *slotdv1.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s by %s (%s), reason %q: %d moves, %.2f MB; balance_by %q, note %q, hot spots %v",
		p.GetId(), p.GetOperator(), p.GetState(), p.GetReason(), p.GetProgress().GetMoves(), float64(p.GetTotalBytes())/1e6,
		p.GetBalanceBy(), p.GetNote(), p.GetHotSpots())
	for _, n := range p.GetNodes() {
		fmt.Fprintf(&b, "\n  %s: slots %d -> %d, bytes %.2f -> %.2f MB, bytes ratio %.3f -> %.3f, ops ratio %.3f -> %.3f (load known %v)",
			n.GetNodeId(), n.GetSlotsBefore(), n.GetSlotsAfter(), float64(n.GetBytesBefore())/1e6, float64(n.GetBytesAfter())/1e6,
			n.GetLoadBefore().GetBytesRatio(), n.GetLoadAfter().GetBytesRatio(), n.GetLoadBefore().GetOpsRatio(), n.GetLoadAfter().GetOpsRatio(),
			n.GetLoadKnown())
	}
	return b.String()
}

// planJSON is p as slotctl prints it, without its moves (thousands of
// lines), for a failure's message.
func planJSON(p *slotdv1.Plan) string {
	q := proto.Clone(p).(*slotdv1.Plan)
	q.Moves = nil
	return protojson.Format(q)
}
