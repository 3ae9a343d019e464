package tlsconf_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/slotd/slotd/tlsconf"
)

// TestHTTPListener serves HTTPS from Server.TLSConfig, the way slotd's
// metrics listener does, with client certificates required.
func TestHTTPListener(t *testing.T) {
	p := newPKI(t, "ca")
	srvCert, srvKey, _ := p.issue("server", serverLeaf())
	cliCert, cliKey, _ := p.issue("client", clientLeaf("prometheus"))
	ca := p.path("ca.pem")
	cfg := tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: ca, ClientAuth: tlsconf.ClientAuthRequire}
	if !cfg.VerifiesClientCerts() || (tlsconf.Config{CertFile: "c", KeyFile: "k"}).VerifiesClientCerts() {
		t.Fatal("VerifiesClientCerts disagrees with ClientAuth")
	}
	s, err := tlsconf.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s", r.TLS.PeerCertificates[0].Subject.CommonName)
		}),
		TLSConfig: s.TLSConfig(),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeTLS: %v", err)
		}
	})

	get := func(cfg tlsconf.Config) (string, error) {
		c, err := tlsconf.NewClient(cfg)
		if err != nil {
			return "", err
		}
		tr := &http.Transport{TLSClientConfig: c.TLSConfig()}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	body, err := get(tlsconf.Config{CAFile: ca, CertFile: cliCert, KeyFile: cliKey})
	if err != nil || body != "hello prometheus" {
		t.Fatalf("GET with client cert: %q, %v", body, err)
	}
	if _, err := get(tlsconf.Config{CAFile: ca}); err == nil {
		t.Fatal("GET without a client certificate succeeded; want the handshake refused")
	}
}
