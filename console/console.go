package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/auth"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is sent with every answer: the page runs its own
// script and style from /ui/ and talks to this server only; nothing
// inline, nothing from elsewhere, no frames, no forms.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// The gRPC methods whose policy rules decide who may read the JSON: the
// status and load need what Admin/Status needs, the map what GetMap does
// (both the read role in slotd's policy).
const (
	statusMethod = "/slotd.v1.Admin/Status"
	mapMethod    = "/slotd.v1.Directory/GetMap"
)

// Config configures the console.
type Config struct {
	// Source is what the console shows. Required.
	Source Source
	// Load, when set, supplies measured load (heat map, hot slots and
	// keys, bytes and ops per node); without it everything is unmeasured.
	Load LoadSource
	// Authorizer decides who may read the JSON (nil or disabled: anyone
	// who reaches the port, as for gRPC).
	Authorizer *auth.Authorizer
	// Timeout bounds the reads behind one answer; default 5s.
	Timeout time.Duration
	// RateWindow is how far back the plan's rate looks; default 15s.
	RateWindow time.Duration
	// Now is the clock (tests); default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Source == nil:
		return errors.New("console: Source is required")
	case c.Timeout < 0 || c.RateWindow < 0:
		return errors.New("console: durations must not be negative")
	}
	return nil
}

// Handler serves the console. Safe for concurrent use.
type Handler struct {
	cfg   Config
	mux   *http.ServeMux
	rates *rateSampler

	mu           sync.Mutex // guards mapBody and replicasBody
	mapBody      *cached    // the map's JSON at one version
	replicasBody *cached    // the replica sets' JSON at one version of the map
}

type cached struct {
	key  string // version and cluster
	etag string
	body []byte
}

// New builds the console handler. Mount it at "/" of slotd's HTTP mux
// (it answers /, /ui/ and /api/v1/; give other paths their own handlers).
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), rates: &rateSampler{window: cfg.RateWindow}}
	ui, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	h.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	h.mux.Handle("GET /ui/", http.StripPrefix("/ui/", staticHandler(ui)))
	h.mux.HandleFunc("GET /api/v1/status", h.serveStatus)
	h.mux.HandleFunc("GET /api/v1/map", h.serveMap)
	h.mux.HandleFunc("GET /api/v1/load", h.serveLoad)
	h.mux.HandleFunc("GET /api/v1/replicas", h.serveReplicas)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

// staticHandler serves the embedded page; each file's ETag is its hash.
func staticHandler(ui fs.FS) http.Handler {
	type file struct {
		body []byte
		etag string
		ct   string
	}
	files := map[string]file{}
	_ = fs.WalkDir(ui, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(ui, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		files[p] = file{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ct: ct}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.ct)
		w.Header().Set("Cache-Control", "no-cache")
		writeTagged(w, r, f.etag, f.body)
	})
}

// writeTagged answers 304 when the client holds etag, else body.
func writeTagged(w http.ResponseWriter, r *http.Request, etag string, body []byte) {
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(body)
}

// authorize checks the caller against method's policy rule; false when it
// answered the refusal.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, method string) bool {
	if h.cfg.Authorizer == nil {
		return true
	}
	if _, err := h.cfg.Authorizer.AuthorizeHTTP(r, method); err != nil {
		code := auth.HTTPStatus(err)
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="slotd"`)
		}
		writeError(w, code, status.Convert(err).Message())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// writeJSON encodes v and answers it with an ETag of its hash.
func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sum := sha256.Sum256(buf.Bytes())
	jsonHeaders(w)
	writeTagged(w, r, `"`+hex.EncodeToString(sum[:8])+`"`, buf.Bytes())
}

func jsonHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, statusMethod) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	st, err := h.buildStatus(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "status: "+err.Error())
		return
	}
	writeJSON(w, r, st)
}

// serveMap answers the served map, encoded once per version.
func (h *Handler) serveMap(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, mapMethod) {
		return
	}
	m := h.cfg.Source.Map()
	h.serveVersioned(w, r, m, &h.mapBody, "m", func() (any, bool, error) { return buildMap(m), true, nil })
}

// serveVersioned answers the JSON that build makes at the version of m,
// the served map: built once per version and cluster and kept in *slot
// (unless build says not to keep it), its ETag tag and the body's hash. A
// build's error is its status's message, 503.
func (h *Handler) serveVersioned(w http.ResponseWriter, r *http.Request, m *slotmap.Map, slot **cached, tag string, build func() (v any, keep bool, err error)) {
	key := "none"
	if m != nil {
		key = m.ClusterID() + "/" + uitoa(m.Version())
	}
	h.mu.Lock()
	c := *slot
	h.mu.Unlock()
	if c == nil || c.key != key {
		v, keep, err := build()
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, status.Convert(err).Message())
			return
		}
		body, err := json.Marshal(v)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		sum := sha256.Sum256(body)
		c = &cached{key: key, etag: `"` + tag + hex.EncodeToString(sum[:8]) + `"`, body: append(body, '\n')}
		if keep {
			h.mu.Lock()
			*slot = c
			h.mu.Unlock()
		}
	}
	jsonHeaders(w)
	writeTagged(w, r, c.etag, c.body)
}

func (h *Handler) serveLoad(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, statusMethod) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	m := h.cfg.Source.Map()
	var v uint64
	if m != nil {
		v = m.Version()
	}
	writeJSON(w, r, buildLoad(v, slotLoads(m, h.view(ctx))))
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		if v /= 10; v == 0 {
			return string(b[i:])
		}
	}
}

// rateSampler turns a plan's progress, observed at each status read, into
// rates over a sliding window.
type rateSampler struct {
	window time.Duration

	mu      sync.Mutex // guards plan and samples
	plan    string
	samples []rateSample
}

type rateSample struct {
	at    time.Time
	moves uint32 // finished: done, skipped or aborted
	bytes uint64
}

// observe records the plan's progress at now and returns its rates since
// the oldest sample in the window; ok is false until two samples are at
// least a second apart.
func (r *rateSampler) observe(plan string, now time.Time, moves uint32, bytes uint64) (movesPerSec, bytesPerSec float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if plan != r.plan {
		r.plan, r.samples = plan, r.samples[:0]
	}
	r.samples = append(r.samples, rateSample{at: now, moves: moves, bytes: bytes})
	// Keep one sample at or before the window's start, so the rate spans
	// the whole window once it can.
	cut := 0
	for cut+1 < len(r.samples) && now.Sub(r.samples[cut+1].at) >= r.window {
		cut++
	}
	r.samples = r.samples[cut:]
	first := r.samples[0]
	dt := now.Sub(first.at).Seconds()
	if dt < 1 || moves < first.moves || bytes < first.bytes {
		return 0, 0, false
	}
	return float64(moves-first.moves) / dt, float64(bytes-first.bytes) / dt, true
}
