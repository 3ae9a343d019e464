package tlsconf_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/tlsconf"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  tlsconf.Config
		want string // substring of the error; "" means valid
	}{
		{"zero is valid (TLS off)", tlsconf.Config{}, ""},
		{"full server", tlsconf.Config{CertFile: "c", KeyFile: "k", CAFile: "ca", ClientAuth: tlsconf.ClientAuthRequire}, ""},
		{"cert without key", tlsconf.Config{CertFile: "c"}, `cert file "c" and key file "" must be given together`},
		{"key without cert", tlsconf.Config{KeyFile: "k"}, "must be given together"},
		{"require without CA", tlsconf.Config{CertFile: "c", KeyFile: "k", ClientAuth: tlsconf.ClientAuthRequire}, `client auth "require" needs a CA file`},
		{"request without CA", tlsconf.Config{CertFile: "c", KeyFile: "k", ClientAuth: tlsconf.ClientAuthRequest}, "needs a CA file"},
		{"unknown client auth", tlsconf.Config{ClientAuth: "always"}, `client auth "always" is not one of none, request, require`},
		{"negative interval", tlsconf.Config{ReloadInterval: -time.Second}, "reload interval -1s is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tlsconf.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	if !(tlsconf.Config{CAFile: "ca"}).Enabled() || (tlsconf.Config{}).Enabled() {
		t.Fatal("Enabled() disagrees with the files set")
	}
	if _, err := tlsconf.NewServer(tlsconf.Config{CAFile: "ca"}); !errors.Is(err, tlsconf.ErrInvalid) {
		t.Fatalf("NewServer without a certificate: %v, want ErrInvalid", err)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	p := newPKI(t, "ca")
	cert, key, _ := p.issue("good", serverLeaf())
	_, otherKey, _ := p.issue("other", serverLeaf())
	oldCert, oldKey, _ := p.issue("old", devca.Leaf{CommonName: "old", Server: true, ValidFor: -time.Hour})
	garbage := p.path("garbage.pem")
	writeFile(t, garbage, "not pem at all\n")
	keyOnly := p.path("keyonly.pem")
	writeFile(t, keyOnly, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	missing := p.path("missing.pem")

	tests := []struct {
		name string
		cfg  tlsconf.Config
		want []string
		is   error
	}{
		{"missing cert", tlsconf.Config{CertFile: missing, KeyFile: key}, []string{"cert file", missing}, fs.ErrNotExist},
		{"missing ca", tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: missing}, []string{"ca file", missing}, fs.ErrNotExist},
		{"cert not PEM", tlsconf.Config{CertFile: garbage, KeyFile: key}, []string{"cert file " + garbage + ": no PEM certificate found"}, nil},
		{"key not PEM", tlsconf.Config{CertFile: cert, KeyFile: garbage}, []string{"key file " + garbage + ": no PEM private key found"}, nil},
		{"key mismatch", tlsconf.Config{CertFile: cert, KeyFile: otherKey}, []string{"key file " + otherKey + " does not match cert file " + cert}, nil},
		{"expired", tlsconf.Config{CertFile: oldCert, KeyFile: oldKey}, []string{"cert file " + oldCert + " expired at", "renew it"}, nil},
		{"ca not PEM", tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: garbage}, []string{"ca file " + garbage + ": no PEM certificates found"}, nil},
		{"ca bad DER", tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: keyOnly}, []string{"ca file " + keyOnly + ": certificate 1:"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsconf.NewServer(tc.cfg)
			if !errors.Is(err, tlsconf.ErrLoad) {
				t.Fatalf("NewServer: %v, want ErrLoad", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("NewServer: %v, want errors.Is %v", err, tc.is)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error spans lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestHandshakes drives real gRPC connections over 127.0.0.1 through every
// client-auth mode with good and bad clients.
func TestHandshakes(t *testing.T) {
	p := newPKI(t, "good CA")
	evil := newPKI(t, "evil CA")
	srvCert, srvKey, _ := p.issue("server", serverLeaf())
	locCert, locKey, _ := p.issue("localhost-only", devca.Leaf{CommonName: "lo", DNSNames: []string{"localhost"}, Server: true})
	cliCert, cliKey, _ := p.issue("client", clientLeaf("client"))
	evilCert, evilKey, _ := evil.issue("client", clientLeaf("mallory"))
	evilSrvCert, evilSrvKey, _ := evil.issue("server", serverLeaf())
	ca, evilCA := p.path("ca.pem"), evil.path("ca.pem")

	newClient := func(cfg tlsconf.Config) credentials.TransportCredentials {
		c, err := tlsconf.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c.Credentials()
	}
	goodClient := newClient(tlsconf.Config{CAFile: ca})
	mtlsClient := newClient(tlsconf.Config{CAFile: ca, CertFile: cliCert, KeyFile: cliKey})
	evilMTLSClient := newClient(tlsconf.Config{CAFile: ca, CertFile: evilCert, KeyFile: evilKey})
	wrongCAClient := newClient(tlsconf.Config{CAFile: evilCA})

	servers := map[string]*testServer{}
	serve := func(name string, cfg tlsconf.Config) {
		s, err := tlsconf.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		servers[name] = startServer(t, s.Credentials())
	}
	serve("none", tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, ClientAuth: tlsconf.ClientAuthNone})
	serve("request", tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: ca}) // default with a CA
	serve("require", tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: ca, ClientAuth: tlsconf.ClientAuthRequire})
	serve("localhost-only", tlsconf.Config{CertFile: locCert, KeyFile: locKey})
	serve("evil", tlsconf.Config{CertFile: evilSrvCert, KeyFile: evilSrvKey})

	tests := []struct {
		name   string
		server string
		creds  credentials.TransportCredentials
		ok     bool
	}{
		{"plaintext client refused by TLS server", "none", insecure.NewCredentials(), false},
		{"plaintext client refused by mTLS server", "require", insecure.NewCredentials(), false},
		{"TLS client accepted", "none", goodClient, true},
		{"client trusting another CA refuses server", "none", wrongCAClient, false},
		{"server from another CA refused", "evil", goodClient, false},
		{"server name mismatch refused", "localhost-only", goodClient, false},
		{"request: no client cert accepted", "request", goodClient, true},
		{"request: good client cert accepted", "request", mtlsClient, true},
		{"request: client cert from wrong CA refused", "request", evilMTLSClient, false},
		{"require: missing client cert refused", "require", goodClient, false},
		{"require: client cert from wrong CA refused", "require", evilMTLSClient, false},
		{"require: good client cert accepted", "require", mtlsClient, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := check(servers[tc.server].addr, tc.creds)
			if tc.ok && err != nil {
				t.Fatalf("want success, got %v", err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("connection succeeded; want it refused")
				}
				if c := status.Code(err); c != codes.Unavailable {
					t.Fatalf("code %v (%v), want Unavailable from a failed handshake", c, err)
				}
			}
		})
	}
}

func TestServerCertificateRotation(t *testing.T) {
	p := newPKI(t, "ca")
	cert, key, first := p.issue("server", serverLeaf())
	s, err := tlsconf.NewServer(tlsconf.Config{CertFile: cert, KeyFile: key, ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, s.Credentials())
	c, err := tlsconf.NewClient(tlsconf.Config{CAFile: p.path("ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := check(ts.addr, c.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	if err := sameSerial(got, first.SerialNumber); err != nil {
		t.Fatal(err)
	}

	second := p.issueInto(cert, key, serverLeaf())
	eventually(t, "new connection sees the rotated server certificate", func() error {
		got, err := check(ts.addr, c.Credentials())
		if err != nil {
			return err
		}
		return sameSerial(got, second.SerialNumber)
	})
	if err := sameSerial(s.Certificate().SerialNumber, second.SerialNumber); err != nil {
		t.Fatal(err)
	}
}

func TestClientCertificateRotation(t *testing.T) {
	p := newPKI(t, "ca")
	srvCert, srvKey, _ := p.issue("server", serverLeaf())
	s, err := tlsconf.NewServer(tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: p.path("ca.pem"),
		ClientAuth: tlsconf.ClientAuthRequire})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, s.Credentials())
	cert, key, first := p.issue("client", clientLeaf("c1"))
	c, err := tlsconf.NewClient(tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: p.path("ca.pem"),
		ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(ts.addr, c.Credentials()); err != nil {
		t.Fatal(err)
	}
	if err := sameSerial(ts.clientSerial(), first.SerialNumber); err != nil {
		t.Fatal(err)
	}
	second := p.issueInto(cert, key, clientLeaf("c2"))
	eventually(t, "server sees the rotated client certificate", func() error {
		if _, err := check(ts.addr, c.Credentials()); err != nil {
			return err
		}
		return sameSerial(ts.clientSerial(), second.SerialNumber)
	})
}

// TestCARotation moves a server to a new CA: the client's CA file is swapped
// to the new CA and the client follows without being rebuilt.
func TestCARotation(t *testing.T) {
	oldCA := newPKI(t, "old CA")
	newCA := newPKI(t, "new CA")
	cert, key, _ := oldCA.issue("server", serverLeaf())
	s, err := tlsconf.NewServer(tlsconf.Config{CertFile: cert, KeyFile: key, ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, s.Credentials())
	caFile := oldCA.path("ca.pem")
	c, err := tlsconf.NewClient(tlsconf.Config{CAFile: caFile, ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(ts.addr, c.Credentials()); err != nil {
		t.Fatal(err)
	}

	rotated := newCA.issueInto(cert, key, serverLeaf())
	newCA.writeCA(caFile)
	eventually(t, "client trusts the new CA and sees the new server certificate", func() error {
		got, err := check(ts.addr, c.Credentials())
		if err != nil {
			return err
		}
		return sameSerial(got, rotated.SerialNumber)
	})
}

// TestBadReloadKeepsServing: a half-finished rotation (a certificate that is
// not PEM) is refused and the previous certificate keeps serving.
func TestBadReloadKeepsServing(t *testing.T) {
	p := newPKI(t, "ca")
	cert, key, first := p.issue("server", serverLeaf())
	s, err := tlsconf.NewServer(tlsconf.Config{CertFile: cert, KeyFile: key, ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, s.Credentials())
	c, err := tlsconf.NewClient(tlsconf.Config{CAFile: p.path("ca.pem")})
	if err != nil {
		t.Fatal(err)
	}

	writeFile(t, cert, "truncated")
	err = s.Reload()
	if !errors.Is(err, tlsconf.ErrLoad) || !strings.Contains(err.Error(), cert) {
		t.Fatalf("Reload() = %v, want ErrLoad naming %s", err, cert)
	}
	got, err := check(ts.addr, c.Credentials())
	if err != nil {
		t.Fatalf("after a bad reload: %v", err)
	}
	if err := sameSerial(got, first.SerialNumber); err != nil {
		t.Fatal(err)
	}

	// The operator finishes the rotation: the new pair is picked up.
	second := p.issueInto(cert, key, serverLeaf())
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	got, err = check(ts.addr, c.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	if err := sameSerial(got, second.SerialNumber); err != nil {
		t.Fatal(err)
	}
}
