package auth

import (
	"context"
	"crypto/x509"
	"strings"
)

// DefaultTrustDomain names the cluster in role URIs and OUs when
// Config.TrustDomain is empty.
const DefaultTrustDomain = "slotd"

// Identity is who a caller proved to be and the roles that gives it.
type Identity struct {
	// Name is the certificate's common name (or its first URI SAN when the
	// CN is empty) and/or the token's name, joined by "+". For logs and the
	// directory history ("operator").
	Name string
	// Source is "certificate", "token" or "certificate+token".
	Source string
	// Roles is the union of the certificate's and the token's roles.
	Roles RoleSet
}

type identityKey struct{}

// FromContext returns the identity the interceptors attached to a request.
// It is absent when authorization is disabled or the method is public.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Operator names the caller for history records: the identity's name, or
// "anonymous" when there is none (authorization disabled).
func Operator(ctx context.Context) string {
	if id, ok := FromContext(ctx); ok && id.Name != "" {
		return id.Name
	}
	return "anonymous"
}

// RoleURI is the URI SAN that grants role in trustDomain:
// spiffe://<trustDomain>/role/<role>.
func RoleURI(trustDomain string, role Role) string {
	return "spiffe://" + trustDomain + "/role/" + string(role)
}

// CertRoles returns the roles a verified client certificate carries in
// trustDomain. The rule: every URI SAN spiffe://<trustDomain>/role/<role>
// and every subject OU "<trustDomain>/role/<role>" grants <role>. Anything
// else (other schemes, other trust domains, unknown role names) grants
// nothing, so a CA shared with other systems cannot hand out slotd roles by
// accident unless it writes slotd's trust domain.
func CertRoles(c *x509.Certificate, trustDomain string) RoleSet {
	var s RoleSet
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" || u.Host != trustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			continue
		}
		if name, ok := strings.CutPrefix(u.Path, "/role/"); ok {
			if r, err := ParseRole(name); err == nil {
				s |= r.bit()
			}
		}
	}
	for _, ou := range c.Subject.OrganizationalUnit {
		if name, ok := strings.CutPrefix(ou, trustDomain+"/role/"); ok {
			if r, err := ParseRole(name); err == nil {
				s |= r.bit()
			}
		}
	}
	return s
}

func certName(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	if len(c.URIs) > 0 {
		return c.URIs[0].String()
	}
	return "serial:" + c.SerialNumber.Text(16)
}
