package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/console"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slots"
)

// noRedirect is an HTTP client that shows redirects instead of following.
var noRedirect = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, c *http.Client, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestHTTPSurface: what slotd's HTTP port answers with the console
// mounted: redirects to /ui/, the embedded page under its CSP, the JSON
// with ETags and 304s, and /metrics as before.
func TestHTTPSurface(t *testing.T) {
	c := startCluster(t, 2)
	base := "http://" + c.slotd.HTTPAddr()

	resp, _ := get(t, noRedirect, base+"/")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET / = %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, noRedirect, base+"/ui"); resp.StatusCode != http.StatusMovedPermanently {
		t.Fatalf("GET /ui = %s", resp.Status)
	}
	resp, page := get(t, noRedirect, base+"/ui/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy || !strings.Contains(string(page), `<canvas id="map"`) {
		t.Fatalf("GET /ui/ = %s %v", resp.Status, resp.Header)
	}
	// Nothing from elsewhere: every src and href is relative.
	for _, attr := range []string{`src="http`, `href="http`, `src="//`, `href="//`} {
		if strings.Contains(string(page), attr) {
			t.Errorf("the page loads from elsewhere: %s", attr)
		}
	}
	resp, js := get(t, noRedirect, base+"/ui/app.js")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") || strings.Contains(string(js), "http://") || strings.Contains(string(js), "https://") {
		t.Fatalf("GET /ui/app.js = %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, noRedirect, base+"/ui/app.js", "If-None-Match", resp.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("GET /ui/app.js with its ETag = %s", resp.Status)
	}
	if resp, _ := get(t, noRedirect, base+"/ui/nope.js"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /ui/nope.js = %s", resp.Status)
	}

	version, owners := c.owners(t)
	var m struct {
		Version    uint64   `json:"version"`
		Nodes      []string `json:"nodes"`
		Owners     []int    `json:"owners"`
		Migrations []any    `json:"migrations"`
	}
	var etag string
	waitfor.True(t, 30*time.Second, "the served map at the directory's version", func() bool {
		resp, body := get(t, noRedirect, base+"/api/v1/map")
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("map: %v: %s", err, body)
		}
		etag = resp.Header.Get("ETag")
		return m.Version >= version
	})
	if len(m.Owners) != slots.Count || len(m.Nodes) != 2 {
		t.Fatalf("map: %d owners, nodes %v", len(m.Owners), m.Nodes)
	}
	for s, i := range m.Owners {
		if i < 0 || m.Nodes[i] != owners[s] {
			t.Fatalf("map: slot %d owner index %d, directory says %s", s, i, owners[s])
		}
	}
	if resp, body := get(t, noRedirect, base+"/api/v1/map", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Fatalf("map with its ETag = %s (%d bytes)", resp.Status, len(body))
	}

	resp, body := get(t, noRedirect, base+"/api/v1/status")
	var st struct {
		Version uint64 `json:"version"`
		Nodes   []struct {
			ID    string   `json:"id"`
			Slots uint32   `json:"slots"`
			Bytes *float64 `json:"bytes"`
		} `json:"nodes"`
		History []struct {
			Kind string `json:"kind"`
		} `json:"history"`
		Load struct {
			Measured []string `json:"measured"`
		} `json:"load"`
	}
	if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %s %v: %s", resp.Status, err, body)
	}
	if len(st.Nodes) != 2 || st.Nodes[0].Slots+st.Nodes[1].Slots != slots.Count || st.Nodes[0].Bytes != nil ||
		len(st.History) == 0 || len(st.Load.Measured) != 0 {
		t.Fatalf("status: %s", body)
	}
	if resp, _ := get(t, noRedirect, base+"/api/v1/status", "If-None-Match", resp.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Logf("status changed between two reads (%s): a heartbeat or a move", resp.Status)
	}
	_, body = get(t, noRedirect, base+"/api/v1/load")
	var l struct {
		Bytes []*float64 `json:"bytes"`
	}
	if err := json.Unmarshal(body, &l); err != nil || len(l.Bytes) != slots.Count {
		t.Fatalf("load: %v %d", err, len(l.Bytes))
	}
	for s, b := range l.Bytes {
		if b != nil {
			t.Fatalf("load: slot %d measured (%v) with no load source", s, *b)
		}
	}
	if resp, body := get(t, noRedirect, base+"/metrics"); resp.StatusCode != 200 || !strings.Contains(string(body), "slotd_") {
		t.Fatalf("/metrics = %s", resp.Status)
	}
}

// grpcSource is a console.Source over slotd's gRPC API and a directory,
// for a console built by the test.
type grpcSource struct {
	c     *client.Client
	admin slotdv1.AdminClient
	dir   slotdv1.DirectoryClient
	d     *directory.Directory
}

func (s grpcSource) Map() *slotmap.Map { return s.c.Map() }
func (s grpcSource) Status(ctx context.Context) (*slotdv1.StatusResponse, error) {
	return s.admin.Status(ctx, &slotdv1.StatusRequest{})
}
func (s grpcSource) Nodes(ctx context.Context) (*slotdv1.ListNodesResponse, error) {
	return s.dir.ListNodes(ctx, &slotdv1.ListNodesRequest{})
}
func (s grpcSource) History(ctx context.Context, limit int) ([]directory.Change, error) {
	return s.d.History(ctx, limit)
}
func (s grpcSource) Replicas(ctx context.Context) (*slotdv1.ListReplicaSetsResponse, error) {
	return s.admin.ListReplicaSets(ctx, &slotdv1.ListReplicaSetsRequest{})
}

// fakeLoad is a LoadSource that knows one node's load: the node's totals
// are its slots' sums, and it holds its fair share (ratios 1); the view
// lists no other node.
type fakeLoad struct {
	id   string
	load planner.NodeLoad
}

func (f fakeLoad) View(context.Context) (load.View, error) {
	n := load.NodeView{ID: f.id, Known: true, Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE, Slots: f.load.Slots, HotKeys: f.load.HotKeys}
	for _, s := range f.load.Slots {
		n.Keys += uint64(s.Keys)
		n.Bytes += uint64(s.Bytes)
		n.Reads10m += s.Reads
		n.Writes10m += s.Writes
	}
	n.FairKeys, n.FairBytes, n.FairOps = float64(n.Keys), float64(n.Bytes), n.Ops()
	return load.View{Nodes: []load.NodeView{n}}, nil
}

// TestLoadSeam: with a LoadSource, slots of a node that reported show
// their load (zero for a slot its report leaves out), slots of a node that
// did not are null (unmeasured, never zero); node sums and ratios, hot
// slots and hot keys follow the reports.
func TestLoadSeam(t *testing.T) {
	c := startCluster(t, 2)
	conn := c.slotd.Dial(t)
	src := grpcSource{c: c.slotd.Client(t, client.Options{}), admin: c.admin, dir: slotdv1.NewDirectoryClient(conn), d: c.slotd.Directory(t)}
	m := src.Map()
	n1 := m.SlotsOf("n1")
	var hot, warm, idle int = -1, -1, -1
	for s := range n1.All() {
		switch {
		case hot < 0:
			hot = s.Int()
		case warm < 0:
			warm = s.Int()
		case idle < 0:
			idle = s.Int()
		}
	}
	loads := fakeLoad{"n1", planner.NodeLoad{
		Slots:   []planner.SlotLoad{{Slot: uint16(hot), Keys: 10, Bytes: 1000, Reads: 40, Writes: 10}, {Slot: uint16(warm), Keys: 5, Bytes: 3000, Reads: 1}},
		HotKeys: []planner.HotKey{{Key: "user:42", Rate: 30, Slot: uint16(hot)}},
	}}
	h, err := console.New(console.Config{Source: src, Load: loads})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	_, body := get(t, srv.Client(), srv.URL+"/api/v1/load")
	var l struct {
		Keys, Bytes, Ops []*float64
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	val := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}
	if val(l.Bytes[hot]) != 1000 || val(l.Ops[hot]) != 50 || val(l.Keys[warm]) != 5 || val(l.Bytes[idle]) != 0 {
		t.Fatalf("n1's slots: hot %v/%v, warm keys %v, idle %v", val(l.Bytes[hot]), val(l.Ops[hot]), val(l.Keys[warm]), val(l.Bytes[idle]))
	}
	n2 := m.SlotsOf("n2")
	for s := range n2.All() {
		if l.Bytes[s.Int()] != nil || l.Ops[s.Int()] != nil {
			t.Fatalf("slot %d of n2, which reported nothing, is measured", s.Int())
		}
	}

	_, body = get(t, srv.Client(), srv.URL+"/api/v1/status")
	var st struct {
		Nodes []struct {
			ID         string   `json:"id"`
			Bytes      *float64 `json:"bytes"`
			Ops        *float64 `json:"ops"`
			BytesRatio *float64 `json:"bytes_ratio"`
		} `json:"nodes"`
		Load struct {
			Measured []string `json:"measured"`
			HotSlots []struct {
				Slot int     `json:"slot"`
				Ops  float64 `json:"ops"`
			} `json:"hot_slots"`
			HotKeys []struct {
				Key  string `json:"key"`
				Node string `json:"node"`
			} `json:"hot_keys"`
		} `json:"load"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if val(st.Nodes[0].Bytes) != 4000 || val(st.Nodes[0].Ops) != 51 || val(st.Nodes[0].BytesRatio) != 1 || st.Nodes[1].Bytes != nil {
		t.Fatalf("nodes: %s", body)
	}
	if len(st.Load.HotSlots) != 2 || st.Load.HotSlots[0].Slot != hot || len(st.Load.HotKeys) != 1 || st.Load.HotKeys[0].Node != "n1" ||
		strings.Join(st.Load.Measured, ",") != "n1" {
		t.Fatalf("load: %s", body)
	}
}

// TestAuthorizeHTTP: with TLS and roles on, the console's JSON needs the
// read role, from the same client certificates and tokens as gRPC, over
// real TLS; the page itself is public.
func TestAuthorizeHTTP(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 0, func(cfg *server.Config) {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA, cfg.TokenFile = set.ServerCert, set.ServerKey, set.CA, set.TokenFile
	})
	pem, err := os.ReadFile(set.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := func(cert, key string) *http.Client {
		cfg := &tls.Config{RootCAs: pool}
		if cert != "" {
			kp, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	}
	token := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + strings.TrimSpace(string(b))
	}
	base := "https://" + c.slotd.HTTPAddr()
	anon, reader := client("", ""), client(set.ReadCert, set.ReadKey)
	for _, tc := range []struct {
		name   string
		c      *http.Client
		path   string
		header []string
		want   int
	}{
		{"page without identity", anon, "/ui/", nil, http.StatusOK},
		{"status without identity", anon, "/api/v1/status", nil, http.StatusUnauthorized},
		{"map without identity", anon, "/api/v1/map", nil, http.StatusUnauthorized},
		{"load without identity", anon, "/api/v1/load", nil, http.StatusUnauthorized},
		{"replicas without identity", anon, "/api/v1/replicas", nil, http.StatusUnauthorized},
		{"read certificate, replicas", reader, "/api/v1/replicas", nil, http.StatusOK},
		{"unknown token", anon, "/api/v1/status", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"read token", anon, "/api/v1/status", []string{"Authorization", token(set.ReadToken)}, http.StatusOK},
		{"read certificate", reader, "/api/v1/status", nil, http.StatusOK},
		{"read certificate, map", reader, "/api/v1/map", nil, http.StatusOK},
		{"admin certificate", client(set.AdminCert, set.AdminKey), "/api/v1/map", nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, tc.c, base+tc.path, tc.header...)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET %s = %s: %s", tc.path, resp.Status, body)
			}
			if tc.header == nil && tc.want == http.StatusUnauthorized && !strings.Contains(string(body), "role read") {
				t.Errorf("refusal does not name the role: %s", body)
			}
		})
	}
	// Plaintext HTTP to the TLS port gets nothing.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + c.slotd.HTTPAddr() + "/api/v1/status"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plaintext HTTP answered 200")
		}
	}
}

// TestLoadFromStores: slotd's console shows the load that real stores
// report (node.Reporter -> slotd.v1.Load -> the aggregate): the reporting
// node's slots are measured, with the bytes written to them; the silent
// node's stay null.
func TestLoadFromStores(t *testing.T) {
	c := startCluster(t, 2)
	sdk := c.slotd.Client(t, client.Options{})
	kv := kvclient.New(sdk, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer kv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	written := map[int]bool{}
	for i := range 200 {
		k := []byte("key:" + strconv.Itoa(i))
		if _, err := kv.Put(ctx, k, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		if sdk.Map().OwnerID(slots.ForKey(k)) == "n1" {
			written[slots.ForKey(k).Int()] = true
		}
	}
	c.reportLoad(t, "n1")
	base := "http://" + c.slotd.HTTPAddr()
	var l struct{ Bytes []*float64 }
	waitfor.True(t, 30*time.Second, "n1's load on the console", func() bool {
		_, body := get(t, noRedirect, base+"/api/v1/load")
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		for s := range written {
			if l.Bytes[s] == nil || *l.Bytes[s] == 0 {
				return false
			}
		}
		return true
	})
	m := sdk.Map()
	for s := range slots.Count {
		owner := m.OwnerID(slots.MustNew(s))
		if (owner == "n1") != (l.Bytes[s] != nil) {
			t.Fatalf("slot %d of %s: bytes %v; want measured exactly for n1", s, owner, l.Bytes[s])
		}
	}
	_, body := get(t, noRedirect, base+"/api/v1/status")
	var st struct {
		Load struct {
			Measured []string `json:"measured"`
			HotSlots []any    `json:"hot_slots"`
		} `json:"load"`
	}
	if err := json.Unmarshal(body, &st); err != nil || strings.Join(st.Load.Measured, ",") != "n1" || len(st.Load.HotSlots) == 0 {
		t.Fatalf("status load: %v %s", err, body)
	}
}
