package main

import (
	"strings"
	"testing"

	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/server"
)

// TestTLSAndToken: slotctl reaches a slotd that requires TLS and a role,
// with a bearer token or a client certificate, and says what to pass when
// it has neither.
func TestTLSAndToken(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := startSlotd(t, false, func(c *server.Config) {
		c.TLSCert, c.TLSKey, c.TLSCA, c.TokenFile = set.ServerCert, set.ServerKey, set.CA, set.TokenFile
	})

	token := []string{"--tls-ca", set.CA, "--token-file", set.AdminToken}
	s.ok(t, append(token, "init", "--node", "n1=127.0.0.1:7501", "--node", "n2=127.0.0.1:7502")...)
	var h historyJSON
	decode(t, s.ok(t, append(token, "history", "-o", "json")...), &h)
	if len(h.Entries) != 1 || h.Entries[0].Operator == "tester" || h.Entries[0].Operator == "" {
		t.Fatalf("history records %+v; want the token's identity, not the claimed operator", h.Entries)
	}
	// The audit log records the token's identity for a change, whatever
	// operator the command line claims.
	s.ok(t, append(token, "throttle", "4MiB/s", "--reason", "with a token")...)
	var c historyJSON
	decode(t, s.ok(t, append(token, "history", "--kind", "cluster", "-o", "json")...), &c)
	if len(c.Entries) != 2 || c.Entries[0].Action != "throttle" || c.Entries[0].Operator != h.Entries[0].Operator ||
		c.Entries[0].Reason != "with a token" {
		t.Fatalf("audit log %+v; want the throttle by the token's identity %q", c.Entries, h.Entries[0].Operator)
	}
	if out := s.ok(t, "--tls-ca", set.CA, "--tls-cert", set.AdminCert, "--tls-key", set.AdminKey, "status"); !strings.Contains(out, "n2") {
		t.Fatalf("status with an admin certificate: %q", out)
	}
	oneLineErr(t, s.run(t, "", "--tls-ca", set.CA, "--tls-cert", set.ReadCert, "--tls-key", set.ReadKey, "nodes", "drain", "n1"),
		exitFailure, "pass an admin credential")
	oneLineErr(t, s.run(t, "", "status"), exitFailure, "if slotd serves TLS, pass --tls-ca")
	oneLineErr(t, s.run(t, "", "--tls-ca", set.CA, "--token-file", "/nonexistent", "status"), exitFailure, "nonexistent")
}
