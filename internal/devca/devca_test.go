package devca

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGenerateVerifies(t *testing.T) {
	dir := t.TempDir()
	set, err := Generate(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if set.Reused {
		t.Fatal("fresh directory reported as reused")
	}
	caPEM, err := os.ReadFile(set.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	tests := []struct {
		name, cert, key string
		usage           x509.ExtKeyUsage
		host            string
		uris            []string
	}{
		{"server/ipv4", set.ServerCert, set.ServerKey, x509.ExtKeyUsageServerAuth, "127.0.0.1", nil},
		{"server/ipv6", set.ServerCert, set.ServerKey, x509.ExtKeyUsageServerAuth, "::1", nil},
		{"server/localhost", set.ServerCert, set.ServerKey, x509.ExtKeyUsageServerAuth, "localhost", nil},
		{"server/as-client", set.ServerCert, set.ServerKey, x509.ExtKeyUsageClientAuth, "", nil},
		{"admin", set.AdminCert, set.AdminKey, x509.ExtKeyUsageClientAuth, "", []string{"spiffe://slotd/role/admin"}},
		{"read", set.ReadCert, set.ReadKey, x509.ExtKeyUsageClientAuth, "", []string{"spiffe://slotd/role/read"}},
		{"store", set.StoreCert, set.StoreKey, x509.ExtKeyUsageClientAuth, "", []string{"spiffe://slotd/role/store", "spiffe://slotd/role/read"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := tls.LoadX509KeyPair(tc.cert, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			leaf := kp.Leaf
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatalf("verify: %v", err)
			}
			var got []string
			for _, u := range leaf.URIs {
				got = append(got, u.String())
			}
			if strings.Join(got, " ") != strings.Join(tc.uris, " ") {
				t.Fatalf("URIs = %v, want %v", got, tc.uris)
			}
		})
	}
	for _, f := range []string{set.CAKey, set.ServerKey, set.AdminKey, set.TokenFile, set.AdminToken} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; secrets must not be group/world readable", f, fi.Mode().Perm())
		}
	}
	tokens, err := os.ReadFile(set.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := os.ReadFile(set.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tokens), strings.TrimSpace(string(admin))+" admin ") {
		t.Fatalf("admin.token %q is not the admin line of tokens.txt:\n%s", admin, tokens)
	}
}

func TestGenerateKeepsCompleteSetAndRefusesPartial(t *testing.T) {
	dir := t.TempDir()
	first, err := Generate(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ca1, _ := os.ReadFile(first.CA)
	second, err := Generate(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(second.CA)
	if !second.Reused || string(ca1) != string(ca2) {
		t.Fatal("a complete set was not kept")
	}

	if err := os.Remove(filepath.Join(dir, "read.pem")); err != nil {
		t.Fatal(err)
	}
	_, err = Generate(Options{Dir: dir})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "read.pem") {
		t.Fatalf("partial set: err = %v, want ErrInvalid naming read.pem", err)
	}

	forced, err := Generate(Options{Dir: dir, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	ca3, _ := os.ReadFile(forced.CA)
	if forced.Reused || string(ca3) == string(ca1) {
		t.Fatal("-force did not regenerate the CA")
	}
}

func TestIssue(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(Leaf{CommonName: "x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no usage: err = %v, want ErrInvalid", err)
	}
	kp, err := ca.Issue(Leaf{CommonName: "old", Client: true, ValidFor: -time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !kp.Cert.NotAfter.Before(time.Now()) {
		t.Fatalf("negative ValidFor gave NotAfter %v, want the past", kp.Cert.NotAfter)
	}
	a, _ := ca.Issue(Leaf{CommonName: "a", Client: true})
	b, _ := ca.Issue(Leaf{CommonName: "b", Client: true})
	if a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0 {
		t.Fatal("two certificates share a serial")
	}
}

// TestNodeCerts: node-bound store certificates are issued with a new set
// and added to an existing one from its CA files; each verifies against
// the CA and carries the node's URI beside the store and read roles.
func TestNodeCerts(t *testing.T) {
	dir := t.TempDir()
	set, err := Generate(Options{Dir: dir, Nodes: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Generate(Options{Dir: dir, Nodes: []string{"n1", "n2"}})
	if err != nil || !again.Reused {
		t.Fatalf("adding a node to a complete set: reused=%v err=%v", again.Reused, err)
	}
	caPEM, _ := os.ReadFile(set.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, id := range []string{"n1", "n2"} {
		certFile, keyFile := set.NodeCert(id)
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatalf("node %s: %v", id, err)
		}
		leaf, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("node %s certificate does not verify: %v", id, err)
		}
		var uris []string
		for _, u := range leaf.URIs {
			uris = append(uris, u.String())
		}
		want := []string{"spiffe://slotd/role/store", "spiffe://slotd/role/read", "spiffe://slotd/node/" + id}
		if !slices.Equal(uris, want) {
			t.Errorf("node %s URIs %v, want %v", id, uris, want)
		}
	}
	if _, err := Generate(Options{Dir: dir, Nodes: []string{"a/b"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("node id a/b: %v, want ErrInvalid", err)
	}
	if _, err := LoadCA(set.ReadCert, set.ReadKey); !errors.Is(err, ErrInvalid) {
		t.Errorf("LoadCA of a leaf: %v, want ErrInvalid", err)
	}
}
