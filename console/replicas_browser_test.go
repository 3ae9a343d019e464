package console_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/slotd/slotd/internal/browsertest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// The under-replicated layer's colour, and how much it dims the rest.
const (
	underColor = "#ff3dd6"
	layerDim   = 0.3
)

// TestConsoleReplicasInBrowser opens the console of a slotd at rf 3 over
// three zones with one slot under-replicated: the legend names each node's
// zone; the header shows rf, the under-replicated count and the zone
// spread; the under-replicated toggle paints that slot in the layer's
// colour and dims every other cell to its owner's colour (the cells stay
// by primary); hover lists the slot's ISR and learner with their zones;
// the toggle off gives every cell its owner's colour back.
func TestConsoleReplicasInBrowser(t *testing.T) {
	b := browsertest.New(t)
	c := startRF3(t)
	owners := c.snap.Owners()

	b.Do(t, chromedp.Navigate(c.base+"/ui/"), chromedp.WaitVisible(chromedp.ID("map")))
	waitfor.True(t, 30*time.Second, "the page drew the directory's map", func() bool {
		v, _ := strconv.ParseUint(browsertest.Eval[string](t, b, `document.body.dataset.mapVersion || "0"`), 10, 64)
		return v >= c.snap.Version
	})
	zones := browsertest.Eval[map[string]string](t, b, `Object.fromEntries([...document.querySelectorAll("#legend .node")].map((e) => [e.dataset.node, e.dataset.zone + "|" + e.textContent]))`)
	for id, z := range c.zones {
		if zones[id] != z+"|"+id+" ("+z+")" {
			t.Fatalf("legend of %s: %q, want zone %s shown", id, zones[id], z)
		}
	}
	waitfor.True(t, 30*time.Second, "the replication in the header", func() bool {
		h := browsertest.Eval[map[string]string](t, b, `({rf: document.getElementById("rf").textContent, under: document.getElementById("under").textContent,
			spread: document.getElementById("spread").textContent, violations: document.getElementById("violations").textContent})`)
		return h["rf"] == "3 (min isr 2)" && h["under"] == "1" && h["spread"] == "16,384 in 3" && h["violations"] == "0"
	})
	colors := browsertest.Eval[map[string]string](t, b, legend)
	checkCells(t, b, owners, colors)

	// The layer on: the slot stands out, the rest is dimmed by owner.
	toggleLayer(t, b)
	var cells []string
	waitfor.True(t, 30*time.Second, "the under-replicated layer", func() bool {
		cells = browsertest.Eval[[]string](t, b, cellColors)
		return browsertest.Eval[string](t, b, "document.body.dataset.layer") == "under-replicated" && cells[c.slot] == underColor
	})
	dimmed := map[string]string{}
	for id, col := range colors {
		dimmed[id] = dim(t, col)
	}
	for s, o := range owners {
		if s != c.slot && cells[s] != dimmed[o] {
			t.Fatalf("slot %d of %s under the layer: %s, want its owner's colour dimmed, %s", s, o, cells[s], dimmed[o])
		}
	}

	// Hover over the slot: its replicas, zones and state.
	rect := browsertest.Eval[map[string]float64](t, b, `(() => { const r = document.getElementById("map").getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width}; })()`)
	cell := rect["w"] / 128
	b.Do(t, chromedp.MouseEvent("mouseMoved", rect["x"]+float64(c.slot%128)*cell+cell/2, rect["y"]+float64(c.slot/128)*cell+cell/2))
	set := c.snap.Replicas(slots.MustNew(c.slot))
	named := func(ids []string) string {
		var out []string
		for _, id := range ids {
			out = append(out, id+" ("+c.zones[id]+")")
		}
		return strings.Join(out, ", ")
	}
	waitfor.True(t, 10*time.Second, "the hover tip with the replicas", func() bool {
		tip := browsertest.Eval[string](t, b, `document.getElementById("tip").hidden ? "" : document.getElementById("tip").textContent`)
		return strings.Contains(tip, fmt.Sprintf("slot   %d", c.slot)) && strings.Contains(tip, "isr    "+named(set.ISR)) &&
			strings.Contains(tip, "learn  "+named(set.Learners)) && strings.Contains(tip, "state  under-replicated")
	})

	// The layer off: every cell by its owner again.
	toggleLayer(t, b)
	waitfor.True(t, 30*time.Second, "the layer off", func() bool {
		return browsertest.Eval[string](t, b, "document.body.dataset.layer") == "" &&
			browsertest.Eval[string](t, b, fmt.Sprintf(cellColor, c.slot)) == colors[owners[c.slot]]
	})
	checkCells(t, b, owners, colors)
	if errs := b.Errors(t); len(errs) > 0 {
		t.Fatalf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// dim is a "#rrggbb" colour as the layer dims it.
func dim(t *testing.T, col string) string {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(col, "#"), 16, 32)
	if err != nil {
		t.Fatalf("colour %q: %v", col, err)
	}
	out := "#"
	for _, shift := range []int{16, 8, 0} {
		out += fmt.Sprintf("%02x", int(math.Round(float64((v>>shift)&0xff)*layerDim)))
	}
	return out
}

// toggleLayer clicks the under-replicated toggle, as a user does.
func toggleLayer(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	browsertest.Eval[bool](t, b, `(document.getElementById("layer-under").click(), true)`)
}
