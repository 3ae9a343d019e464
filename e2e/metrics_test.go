package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/e2e/harness"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// metricName finds the slotd metric names an expression uses.
var metricName = regexp.MustCompile(`\bslotd_[a-z0-9_]+\b`)

// shippedMetricNames returns every metric name used by the alert rules and
// the Grafana dashboard in deploy/, each with where it is used.
func shippedMetricNames(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	rules, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "slotd-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(rules)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if expr, ok := strings.CutPrefix(line, "expr:"); ok {
			for _, n := range metricName.FindAllString(expr, -1) {
				used[n] = append(used[n], "slotd-rules.yml")
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "slotd-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("slotd-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				used[n] = append(used[n], "dashboard panel "+p.Title)
			}
		}
	}
	return used
}

// exportedFamilies scrapes url (a /metrics page) and returns its metric
// family names with their types, from the "# TYPE" lines.
func exportedFamilies(url string) (map[string]string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(body)) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out, nil
}

// exported reports whether name (a family, or a histogram's _bucket, _sum
// or _count series) is among fams.
func exported(fams map[string]string, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && (fams[base] == "histogram" || fams[base] == "summary") {
			return true
		}
	}
	return false
}

// TestDashboardAndAlertMetricsExported runs a real slotd (embedded etcd)
// and two real slotkv nodes with their HTTP ports on, moves one slot so
// that the mover's per-result series exist, scrapes every process and
// checks that each metric name the alert rules and the dashboard use is
// exported by one of them.
func TestDashboardAndAlertMetricsExported(t *testing.T) {
	// Stores report their load every second, so that the measured-load
	// series (absent while a node's load is unknown) are there to scrape.
	t.Setenv("SLOTKV_LOAD_REPORT_INTERVAL", "1s")
	used := shippedMetricNames(t)
	if len(used) < 10 {
		t.Fatalf("found only %d metric names in deploy/: %v", len(used), used)
	}

	c := &cluster{t: t, h: harness.New(t), nodes: map[string]*harness.Proc{}, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(c.close)
	addr, httpAddr := c.h.Addr("s1"), c.h.Addr("s1-http")
	c.slotd = append(c.slotd, c.h.Start("s1", "slotd", nil, "--data-dir", c.h.Dir("s1"),
		"--etcd-client-url", c.h.Addr("s1-etcd-client"), "--etcd-peer-url", c.h.Addr("s1-etcd-peer"),
		"--listen", addr, "--http", httpAddr, "--name", "s1", "--log-level", "warn"))
	c.slotdEP = append(c.slotdEP, addr)
	scrape := []string{"http://" + httpAddr + "/metrics"}
	ids := []string{"n1", "n2"}
	for _, id := range ids {
		h := c.h.Addr(id + "-http")
		c.nodes[id] = c.h.Start(id, "slotkv", nil, "--id", id, "--listen", c.h.Addr(id), "--http", h,
			"--data-dir", c.h.Dir(id), "--slotd", addr, "--fsync=false")
		scrape = append(scrape, "http://"+h+"/metrics")
	}
	c.waitRegistered(ids...)
	c.bootstrap(ids)
	c.waitPlan(c.move(0, otherNode(c, 0, ids)), 2*time.Minute)
	// A request to a node that does not own the key's slot: a redirect.
	key := keysFor("metrics", []uint32{0})[0]
	c.h.Eventually(30*time.Second, "a MOVED answer", func() error {
		_, err := c.kvAt(c.h.Addr(otherNode(c, 0, ids))).Get(c.ctx(), &kvpb.GetRequest{Key: []byte(key)})
		if err == nil {
			return errors.New("the non-owner answered")
		}
		// Any other failure (the node not serving its map yet, a deadline
		// on a loaded machine) counts no redirect: ask again.
		if _, ok := redirect.FromError(err); !ok {
			return fmt.Errorf("no redirect yet: %w", err)
		}
		return nil
	})

	var missing []string
	c.h.Eventually(30*time.Second, "every shipped metric exported", func() error {
		all := map[string]string{}
		for _, u := range scrape {
			fams, err := exportedFamilies(u)
			if err != nil {
				return err
			}
			for n, typ := range fams {
				all[n] = typ
			}
		}
		missing = missing[:0]
		for n := range used {
			if !exported(all, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("not exported yet: %v", missing)
		}
		return nil
	})
	t.Logf("%d metric names used by the rules and the dashboard, all exported", len(used))
}

// otherNode returns an id among ids that does not own slot s.
func otherNode(c *cluster, s uint32, ids []string) string {
	m, err := c.getMap(0)
	if err != nil {
		c.t.Fatal(err)
	}
	owner := m.OwnerID(slots.MustNew(int(s)))
	for _, id := range ids {
		if id != owner {
			return id
		}
	}
	c.t.Fatalf("every node owns slot %d", s)
	return ""
}
