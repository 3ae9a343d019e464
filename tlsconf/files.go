package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// material is one consistent, parsed set of files. Never mutated after load,
// so handshakes may keep using a set while a newer one replaces it.
type material struct {
	cert *tls.Certificate // nil when no CertFile
	pool *x509.CertPool   // nil when no CAFile
	// raw contents, compared on each check: cheaper to get right than
	// mtimes, which a fast rotation within one clock tick leaves equal.
	certPEM, keyPEM, caPEM []byte
}

// loader re-reads the files at most once per ReloadInterval, on use. No
// goroutine: nothing to start, stop or leak, and an idle endpoint costs
// nothing.
type loader struct {
	cfg Config

	mu      sync.Mutex // guards cur, checked, lastErr
	cur     *material
	checked time.Time
	lastErr string // last reload failure logged, to log each distinct failure once
}

func newLoader(cfg Config) (*loader, error) {
	m, err := load(cfg, nil)
	if err != nil {
		return nil, err
	}
	return &loader{cfg: cfg, cur: m, checked: time.Now()}, nil
}

// get returns the current set, first re-reading the files if the last
// check is older than ReloadInterval. A failed re-read keeps the old set.
func (l *loader) get() *material {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.checked) >= l.cfg.ReloadInterval {
		_ = l.reloadLocked()
	}
	return l.cur
}

func (l *loader) reload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reloadLocked()
}

func (l *loader) reloadLocked() error {
	l.checked = time.Now()
	m, err := load(l.cfg, l.cur)
	if err != nil {
		if msg := err.Error(); msg != l.lastErr {
			l.lastErr = msg
			l.cfg.Logger.Warn("tls files not reloaded; keeping the previous ones", "err", err)
		}
		return err
	}
	l.lastErr = ""
	if m != l.cur {
		l.cur = m
		args := []any{"cert", l.cfg.CertFile, "ca", l.cfg.CAFile}
		if m.cert != nil {
			args = append(args, "serial", m.cert.Leaf.SerialNumber.Text(16), "not_after", m.cert.Leaf.NotAfter)
		}
		l.cfg.Logger.Info("tls files reloaded", args...)
	}
	return nil
}

// load reads and parses the configured files. It returns prev itself when
// the contents did not change, so callers can tell a reload from a no-op.
func load(cfg Config, prev *material) (*material, error) {
	m := &material{}
	var err error
	if cfg.CertFile != "" {
		if m.certPEM, err = readFile("cert", cfg.CertFile); err != nil {
			return nil, err
		}
		if m.keyPEM, err = readFile("key", cfg.KeyFile); err != nil {
			return nil, err
		}
	}
	if cfg.CAFile != "" {
		if m.caPEM, err = readFile("ca", cfg.CAFile); err != nil {
			return nil, err
		}
	}
	if prev != nil && bytes.Equal(m.certPEM, prev.certPEM) && bytes.Equal(m.keyPEM, prev.keyPEM) &&
		bytes.Equal(m.caPEM, prev.caPEM) {
		return prev, nil
	}
	if cfg.CertFile != "" {
		if m.cert, err = parseKeyPair(cfg.CertFile, cfg.KeyFile, m.certPEM, m.keyPEM); err != nil {
			return nil, err
		}
	}
	if cfg.CAFile != "" {
		if m.pool, err = parseCAs(cfg.CAFile, m.caPEM); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func readFile(what, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The *PathError already names the file; keep it for errors.Is(fs.ErrNotExist).
		return nil, fmt.Errorf("%w: %s file: %w", ErrLoad, what, err)
	}
	return b, nil
}

func parseKeyPair(certFile, keyFile string, certPEM, keyPEM []byte) (*tls.Certificate, error) {
	if !hasBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return nil, fmt.Errorf("%w: cert file %s: no PEM certificate found", ErrLoad, certFile)
	}
	if !hasBlock(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return nil, fmt.Errorf("%w: key file %s: no PEM private key found", ErrLoad, keyFile)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Errorf("%w: key file %s does not match cert file %s", ErrLoad, keyFile, certFile)
		}
		return nil, fmt.Errorf("%w: cert file %s / key file %s: %v", ErrLoad, certFile, keyFile, err)
	}
	if now := time.Now(); now.After(kp.Leaf.NotAfter) {
		return nil, fmt.Errorf("%w: cert file %s expired at %s; renew it", ErrLoad, certFile,
			kp.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &kp, nil
}

func parseCAs(caFile string, caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		n++
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: ca file %s: certificate %d: %v", ErrLoad, caFile, n, err)
		}
		pool.AddCert(c)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: ca file %s: no PEM certificates found", ErrLoad, caFile)
	}
	return pool, nil
}

func hasBlock(data []byte, want func(typ string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if want(b.Type) {
			return true
		}
	}
}
