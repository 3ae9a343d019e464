package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
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
	// Nodes are the store node ids the identity is bound to (certificate
	// URI SANs spiffe://<trustDomain>/node/<id>, token items node:<id>):
	// with any, a store may register and heartbeat only as those nodes
	// (see CheckNode).
	Nodes []string
	// nodeRequired is Config.RequireNodeIdentity of the server that
	// authorized the request.
	nodeRequired bool
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

// NodeURI is the URI SAN that binds a certificate to store node id:
// spiffe://<trustDomain>/node/<id>.
func NodeURI(trustDomain, id string) string {
	return "spiffe://" + trustDomain + "/node/" + id
}

// CertNodes returns the node ids a verified client certificate is bound to
// in trustDomain: every URI SAN spiffe://<trustDomain>/node/<id>.
func CertNodes(c *x509.Certificate, trustDomain string) []string {
	var ids []string
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" || u.Host != trustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			continue
		}
		if id, ok := strings.CutPrefix(u.Path, "/node/"); ok && id != "" && !strings.Contains(id, "/") {
			ids = append(ids, id)
		}
	}
	return ids
}

// ErrNotThisNode is returned by CheckNode when the caller may not act as
// the node it names.
var ErrNotThisNode = errors.New("auth: caller may not act as this node")

// CheckNode reports whether the caller in ctx may register or heartbeat as
// store node id. Without authorization, and for admin callers (slotctl
// nodes add registers any node), it may. A caller bound to node ids (see
// Identity.Nodes) may act only as those. An unbound store caller may act
// as any node unless the server requires node identities
// (Config.RequireNodeIdentity).
func CheckNode(ctx context.Context, id string) error {
	who, ok := FromContext(ctx)
	if !ok || who.Roles.Grants(RoleAdmin) {
		return nil
	}
	switch {
	case len(who.Nodes) > 0 && !slices.Contains(who.Nodes, id):
		return fmt.Errorf("%w: caller %q is bound to node %s, not %s", ErrNotThisNode, who.Name, strings.Join(who.Nodes, ", "), id)
	case len(who.Nodes) == 0 && who.nodeRequired:
		return fmt.Errorf("%w: caller %q is bound to no node and this slotd requires it; give its certificate the URI SAN %s (or its token the item node:%s)",
			ErrNotThisNode, who.Name, NodeURI("<trust-domain>", id), id)
	}
	return nil
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
