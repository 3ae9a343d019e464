// Package browsertest drives a real headless Chromium from Go tests, with
// github.com/chromedp/chromedp over the DevTools protocol (no WebDriver, no
// Node), and collects what a person would see go wrong: console errors
// and warnings, uncaught exceptions, failed loads and Content-Security-Policy
// violations.
//
// The browser is Debian's chromium (`make chromium`). Without it a test
// skips, except with CI=true, where it fails: CI must never pass a browser
// test it did not run.
//
// Usage:
//
//	b := browsertest.New(t)
//	b.Run(t, chromedp.Navigate(url), chromedp.WaitVisible("#map", chromedp.ByID))
//	if errs := b.Errors(t); len(errs) > 0 { t.Fatal(errs) }
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Timeout bounds each Run: a hung page fails the test instead of hanging it.
const Timeout = 60 * time.Second

// Path returns the chromium binary; a missing one skips t, or fails it
// when CI=true.
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("browsertest: chromium is not installed and CI=true: run `make chromium` (make test does)")
	}
	t.Skip("browsertest: chromium is not installed (make chromium)")
	return ""
}

// Browser is one headless Chromium with one tab, closed when the test ends.
type Browser struct {
	ctx context.Context

	mu   sync.Mutex // guards errs
	errs []string
}

// cspHook records Content-Security-Policy violations in the page, in case
// a browser reports one only as a DOM event. DevTools injects it, so the
// page's own CSP does not apply to it.
const cspHook = `document.addEventListener("securitypolicyviolation", (e) => {
  (window.__browsertestCSP = window.__browsertestCSP || []).push(e.violatedDirective + " blocked " + (e.blockedURI || "inline"));
});`

// New starts the browser with a 1280x900 window.
func New(t testing.TB) *Browser {
	t.Helper()
	path := Path(t)
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{ctx: ctx}
	// The first call starts the browser, which lives as long as ctx: it
	// must have no timeout of its own.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspHook}); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("browsertest: start %s: %v", path, err)
	}
	// Console errors and warnings, exceptions, and the browser log's errors
	// and warnings (failed loads, CSP violations), until the tab closes.
	msgs := chromedp.Console(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch {
			case m.Type == chromedp.ConsoleError, m.Type == chromedp.ConsoleWarning, m.IsException(), m.Source == "security":
				b.add(m.String() + " (" + m.URL + ")")
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		cancelAlloc()
	})
	return b
}

func (b *Browser) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// Context is the tab's context, for chromedp calls of one's own (bound it).
func (b *Browser) Context() context.Context { return b.ctx }

// Do runs actions in the tab within Timeout, failing t on error.
func (b *Browser) Do(t testing.TB, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// into T, failing t on error.
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	v, err := EvalErr[T](b, expr)
	if err != nil {
		t.Fatalf("browsertest: evaluate %.80q: %v", expr, err)
	}
	return v
}

// EvalErr is Eval returning the error.
func EvalErr[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// Screenshot returns a PNG of the viewport.
func (b *Browser) Screenshot(t testing.TB) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	return png
}

// Errors returns every error seen so far: console errors and warnings,
// exceptions, failed loads, CSP violations (also those the page recorded).
func (b *Browser) Errors(t testing.TB) []string {
	t.Helper()
	csp := Eval[[]string](t, b, `window.__browsertestCSP || []`)
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]string(nil), b.errs...)
	for _, c := range csp {
		out = append(out, "csp: "+c)
	}
	return out
}
