package browsertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/slotd/slotd/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCollectsErrors: a page that logs an error, throws, loads a missing
// file and breaks its own CSP shows all four in Errors, so a clean page
// elsewhere means clean.
func TestCollectsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<!doctype html><html><head><title>t</title><link rel="icon" href="data:,">
<script src="/ok.js"></script><script>document.title = "inline ran";</script></head>
<body><p id="p">page</p><script src="/missing.js"></script></body></html>`))
		case "/ok.js":
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(`console.error("boom from ok.js"); setTimeout(() => { throw new Error("thrown later"); }, 0);`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	b := New(t)
	b.Do(t, chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(chromedp.ID("p")))
	title := Eval[string](t, b, "document.title")
	var all string
	// The exception comes from a timer and the messages arrive as events:
	// poll, bounded.
	waitfor.True(t, 30*time.Second, "every error reported", func() bool {
		all = strings.Join(b.Errors(t), "\n")
		return strings.Contains(all, "thrown later") && strings.Contains(all, "missing.js") && strings.Contains(all, "script-src")
	})
	for _, want := range []string{"boom from ok.js", "thrown later", "missing.js", "script-src"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if title == "inline ran" {
		t.Errorf("the inline script ran despite the CSP")
	}
}
