package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/chromedp/chromedp"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/console"
	"github.com/slotd/slotd/internal/browsertest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/mover/planner"
)

// cellColors reads the colour at the centre of every slot's cell of the
// page's map canvas, as "#rrggbb".
const cellColors = `(() => {
  const c = document.getElementById("map"), cell = c.width / 128;
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, out = [];
  const hex = (v) => v.toString(16).padStart(2, "0");
  for (let s = 0; s < 16384; s++) {
    const x = (s % 128) * cell + cell / 2, y = Math.floor(s / 128) * cell + cell / 2, o = (y * c.width + x) * 4;
    out.push("#" + hex(d[o]) + hex(d[o + 1]) + hex(d[o + 2]));
  }
  return out;
})()`

// cellColor reads one cell's colour (cheap enough to poll).
const cellColor = `(() => {
  const c = document.getElementById("map"), cell = c.width / 128, s = %d;
  const d = c.getContext("2d").getImageData((s %% 128) * cell + cell / 2, Math.floor(s / 128) * cell + cell / 2, 1, 1).data;
  return "#" + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, "0")).join("");
})()`

// legend reads the page's legend: node id -> colour.
const legend = `Object.fromEntries([...document.querySelectorAll("#legend .node")].map((e) => [e.dataset.node, e.dataset.color]))`

// TestConsoleInBrowser opens the console in headless Chromium against a
// real slotd and real slotkv stores: the page loads with no console error,
// exception or CSP violation; the colour of every one of the 16,384 cells
// is the colour the legend gives the slot's owner in the directory; hover
// names the slot and its owner; a running plan shows its rate and ETA; and
// a move repaints its cell, without a reload, within 2 s of the commit.
func TestConsoleInBrowser(t *testing.T) {
	b := browsertest.New(t)
	c := startCluster(t, 3)
	base := "http://" + c.slotd.HTTPAddr()
	version, owners := c.owners(t)

	// "/" redirects to /ui/.
	b.Do(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("map")))
	if u := browsertest.Eval[string](t, b, "location.pathname"); u != "/ui/" {
		t.Fatalf("/ led to %q, want /ui/", u)
	}
	waitfor.True(t, 30*time.Second, "the page drew the bootstrap map", func() bool {
		v, _ := strconv.ParseUint(browsertest.Eval[string](t, b, `document.body.dataset.mapVersion || "0"`), 10, 64)
		return v >= version
	})
	colors := browsertest.Eval[map[string]string](t, b, legend)
	if len(colors) != 3 {
		t.Fatalf("legend %v, want n1-n3", colors)
	}
	checkCells(t, b, owners, colors)
	browsertest.Eval[bool](t, b, "window.__noReload = true")

	// Hover over slot 300 (row 2, column 44).
	const hover = 300
	rect := browsertest.Eval[map[string]float64](t, b, `(() => { const r = document.getElementById("map").getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width}; })()`)
	cell := rect["w"] / 128
	b.Do(t, chromedp.MouseEvent("mouseMoved", rect["x"]+float64(hover%128)*cell+cell/2, rect["y"]+float64(hover/128)*cell+cell/2))
	waitfor.True(t, 10*time.Second, "the hover tip", func() bool {
		tip := browsertest.Eval[string](t, b, `document.getElementById("tip").hidden ? "" : document.getElementById("tip").textContent`)
		return strings.Contains(tip, "slot   300") && strings.Contains(tip, "owner  "+owners[hover]) && strings.Contains(tip, "bytes  unmeasured")
	})

	// A plan that fills a new node: the page follows its progress and
	// shows a rate and an ETA once it has watched it for a second.
	n4 := startStore(t, "n4", c.slotd.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plan, err := c.admin.Plan(ctx, &slotdv1.PlanRequest{Operator: "test", Reason: "fill n4", Add: []*slotdv1.NodeSpec{{Id: "n4", Address: n4, Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.Apply(ctx, &slotdv1.ApplyRequest{PlanId: plan.GetPlan().GetId(), Operator: "test"}); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 30*time.Second, "the plan's rate and ETA on the page", func() bool {
		r := browsertest.Eval[map[string]string](t, b, `Object.fromEntries([...document.querySelectorAll("#plan b[data-key]")].map((e) => [e.dataset.key, e.textContent]))`)
		return r["id"] == plan.GetPlan().GetId() && strings.Contains(r["rate"], "moves/s") && r["eta"] != "-" && r["eta"] != ""
	})
	// The screenshot for docs/console.png: a plan under way, the tip shown.
	shot := b.Screenshot(t)
	path := filepath.Join(t.TempDir(), "console.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(shot))
	if out := os.Getenv("CONSOLE_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.admin.Cancel(ctx, &slotdv1.CancelRequest{PlanId: plan.GetPlan().GetId(), Operator: "test"}); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 30*time.Second, "the plan to stop", func() bool {
		st, err := c.admin.Status(ctx, &slotdv1.StatusRequest{})
		return err == nil && st.GetActivePlan() == nil && len(st.GetInFlight()) == 0
	})

	waitfor.True(t, 30*time.Second, "the page to show no plan", func() bool {
		return strings.Contains(browsertest.Eval[string](t, b, `document.getElementById("plan").textContent`), "no plan applying")
	})
	// The page shows what the directory says after the cancelled plan.
	version, owners = c.owners(t)
	waitfor.True(t, 30*time.Second, "the page at the directory's version", func() bool {
		v, _ := strconv.ParseUint(browsertest.Eval[string](t, b, `document.body.dataset.mapVersion`), 10, 64)
		return v >= version
	})
	colors = browsertest.Eval[map[string]string](t, b, legend)
	checkCells(t, b, owners, colors)

	// One slot moved by hand: its cell changes colour within 2 s of the
	// commit, with no reload.
	const slot = 5000
	to := "n1"
	if owners[slot] == "n1" {
		to = "n2"
	}
	if _, err := c.admin.Move(ctx, &slotdv1.MoveRequest{Slot: slot, To: to, Operator: "test", Reason: "console test"}); err != nil {
		t.Fatal(err)
	}
	var committed time.Time
	waitfor.True(t, 30*time.Second, "the move's commit in the directory", func() bool {
		_, o := c.owners(t)
		committed = time.Now()
		return o[slot] == to
	})
	want := colors[to]
	var repainted time.Time
	waitfor.True(t, 30*time.Second, "the moved cell repainted", func() bool {
		got := browsertest.Eval[string](t, b, fmt.Sprintf(cellColor, slot))
		repainted = time.Now()
		return got == want
	})
	if d := repainted.Sub(committed); d > 2*time.Second {
		t.Errorf("cell %d repainted %v after the commit, want within 2s", slot, d)
	} else {
		t.Logf("cell %d repainted %v after the commit was seen in etcd", slot, d.Round(time.Millisecond))
	}
	if !browsertest.Eval[bool](t, b, "window.__noReload === true") {
		t.Errorf("the page reloaded")
	}
	if errs := b.Errors(t); len(errs) > 0 {
		t.Fatalf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// checkCells compares every cell's colour with its owner's legend colour.
func checkCells(t *testing.T, b *browsertest.Browser, owners []string, colors map[string]string) {
	t.Helper()
	got := browsertest.Eval[[]string](t, b, cellColors)
	if len(got) != len(owners) {
		t.Fatalf("%d cells, want %d", len(got), len(owners))
	}
	bad := 0
	var first []string
	for s, o := range owners {
		if got[s] != colors[o] {
			bad++
			if len(first) < 5 {
				first = append(first, fmt.Sprintf("slot %d: %s, want %s (%s)", s, got[s], colors[o], o))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d cells do not show their owner: %s", bad, len(owners), strings.Join(first, "; "))
	}
}

// TestConsoleHeatMapInBrowser: with measured load from one node, the bytes
// heat map paints that node's slots on the ramp (an empty slot at its low
// end) and the other node's slots grey: unmeasured, never zero.
func TestConsoleHeatMapInBrowser(t *testing.T) {
	b := browsertest.New(t)
	c := startCluster(t, 2)
	src := grpcSource{c: c.slotd.Client(t, client.Options{}), admin: c.admin,
		dir: slotdv1.NewDirectoryClient(c.slotd.Dial(t)), d: c.slotd.Directory(t)}
	m := src.Map()
	n1 := m.SlotsOf("n1")
	var hot, idle = -1, -1
	for s := range n1.All() {
		if hot < 0 {
			hot = s.Int()
		} else if idle < 0 {
			idle = s.Int()
		}
	}
	h, err := console.New(console.Config{Source: src, Load: fakeLoad{"n1", planner.NodeLoad{
		Slots: []planner.SlotLoad{{Slot: uint16(hot), Keys: 100, Bytes: 1 << 20, Reads: 50}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	b.Do(t, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("map")))
	waitfor.True(t, 30*time.Second, "the bytes heat map", func() bool {
		return browsertest.Eval[bool](t, b, `(() => { const r = document.querySelector("input[value=bytes]");
			if (r.disabled) return false; if (!r.checked) r.click(); return document.body.dataset.mode === "bytes"; })()`)
	})
	var cells []string
	waitfor.True(t, 30*time.Second, "the load drawn", func() bool {
		cells = browsertest.Eval[[]string](t, b, cellColors)
		return cells[hot] != cells[idle]
	})
	const grey, low = "#5a5a5a", "#30123b"
	if cells[idle] != low || cells[hot] == grey || cells[hot] == low {
		t.Fatalf("n1's slots: hot %s, idle %s; want the ramp (idle at %s)", cells[hot], cells[idle], low)
	}
	n2 := m.SlotsOf("n2")
	for s := range n2.All() {
		if cells[s.Int()] != grey {
			t.Fatalf("slot %d of n2 (no load report) is %s, want grey %s", s.Int(), cells[s.Int()], grey)
		}
	}
	if errs := b.Errors(t); len(errs) > 0 {
		t.Fatalf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}
