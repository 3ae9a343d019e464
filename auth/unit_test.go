package auth

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"

	"github.com/slotd/slotd/internal/devca"
)

func TestRoleSet(t *testing.T) {
	tests := []struct {
		set    RoleSet
		grants []Role
		denies []Role
		str    string
	}{
		{NewRoleSet(), nil, []Role{RoleRead, RoleAdmin, RoleStore}, "no role"},
		{NewRoleSet(RoleRead), []Role{RoleRead}, []Role{RoleAdmin, RoleStore}, "read"},
		{NewRoleSet(RoleAdmin), []Role{RoleAdmin, RoleRead}, []Role{RoleStore}, "admin"},
		{NewRoleSet(RoleStore), []Role{RoleStore}, []Role{RoleRead, RoleAdmin}, "store"},
		{NewRoleSet(RoleStore, RoleRead), []Role{RoleStore, RoleRead}, []Role{RoleAdmin}, "read,store"},
		{NewRoleSet("root"), nil, []Role{RoleRead, RoleAdmin, RoleStore, "root"}, "no role"},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			for _, r := range tc.grants {
				if !tc.set.Grants(r) {
					t.Errorf("%v does not grant %s", tc.set, r)
				}
			}
			for _, r := range tc.denies {
				if tc.set.Grants(r) {
					t.Errorf("%v grants %s", tc.set, r)
				}
			}
			if got := tc.set.String(); got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
		})
	}
	if _, err := ParseRole("Admin"); !errors.Is(err, ErrUnknownRole) {
		t.Fatalf("ParseRole is case-insensitive: %v", err)
	}
}

func TestPolicy(t *testing.T) {
	p := NewPolicy().
		Require("/slotd.v1.Directory/*", RoleRead).
		Require("/slotd.v1.Admin/*", RoleAdmin).
		Require("/slotd.v1.Admin/Heartbeat", RoleStore).
		Require("/slotd.v1.Admin/Status", RoleRead, RoleStore).
		Public("/grpc.health.v1.Health/*")
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method string
		roles  string
		public bool
		ok     bool
	}{
		{"/slotd.v1.Directory/GetMap", "read", false, true},
		{"/slotd.v1.Admin/Apply", "admin", false, true},
		{"/slotd.v1.Admin/Heartbeat", "store", false, true}, // method rule beats service rule
		{"/slotd.v1.Admin/Status", "read store", false, true},
		{"/grpc.health.v1.Health/Check", "", true, true},
		{"/slotd.v1.Store/Export", "", false, false},     // no rule: denied
		{"/slotd.v1.Admin.Evil/Apply", "", false, false}, // prefix is not a match
		{"/slotd.v1.Admin", "", false, false},
		{"", "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			roles, public, ok := p.Roles(tc.method)
			var names []string
			for _, r := range roles {
				names = append(names, string(r))
			}
			if strings.Join(names, " ") != tc.roles || public != tc.public || ok != tc.ok {
				t.Fatalf("Roles(%q) = %v %v %v, want %q %v %v", tc.method, names, public, ok, tc.roles, tc.public, tc.ok)
			}
		})
	}

	bad := []struct {
		name string
		p    *Policy
		want string
	}{
		{"no slash", NewPolicy().Require("slotd.v1.Admin/*", RoleAdmin), "is not /package.Service/Method"},
		{"no method", NewPolicy().Require("/slotd.v1.Admin/", RoleAdmin), "is not"},
		{"partial wildcard", NewPolicy().Require("/slotd.v1.Admin/Get*", RoleAdmin), "is not"},
		{"no role", NewPolicy().Require("/a.B/C"), "no role given"},
		{"unknown role", NewPolicy().Require("/a.B/C", "root"), `unknown role "root"`},
		{"duplicate", NewPolicy().Require("/a.B/*", RoleRead).Public("/a.B/*"), "has two rules"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want ErrPolicy containing %q", err, tc.want)
			}
			if _, err := New(Config{Policy: tc.p, TokenFile: "unused"}); !errors.Is(err, ErrPolicy) {
				t.Fatalf("New accepted a bad policy: %v", err)
			}
		})
	}
}

func TestParseTokens(t *testing.T) {
	const tok = "0123456789abcdef0123"
	tests := []struct {
		name  string
		data  string
		want  string // "name=roles ..." or the error substring
		isErr bool
	}{
		{"empty", "", "", false},
		{"comments and blanks", "# c\n\n   \n" + tok + " admin alice\n", "alice=admin", false},
		{"several roles, default name", tok + " store,read\n", "token:", false},
		{"two tokens", tok + " read r\n" + tok + "x admin a\n", "r=read a=admin", false},
		{"short token", "short admin\n", "line 1: token is 5 bytes, want at least 16", true},
		{"unknown role", "# x\n" + tok + " admin,root\n", `line 2: auth: unknown role "root"`, true},
		{"too many fields", tok + " admin a b\n", "line 1: want \"token role[,role] [name]\", got 4 fields", true},
		{"one field", tok + "\n", "got 1 fields", true},
		{"duplicate", tok + " read\n" + tok + " admin\n", "line 2: same token as line 1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			es, err := parseTokens("tokens.txt", []byte(tc.data))
			if tc.isErr {
				if !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrTokenFile containing %q", err, tc.want)
				}
				if strings.Contains(err.Error(), tok) {
					t.Fatalf("error leaks the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.name+"="+e.roles.String())
			}
			if g := strings.Join(got, " "); !strings.HasPrefix(g, tc.want) || (tc.want == "" && g != "") {
				t.Fatalf("entries %q, want %q", g, tc.want)
			}
		})
	}
}

func TestCertRoles(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		uris []string
		ous  []string
		want string
	}{
		{"uri admin", []string{"spiffe://slotd/role/admin"}, nil, "admin"},
		{"uri several", []string{"spiffe://slotd/role/store", "spiffe://slotd/role/read"}, nil, "read,store"},
		{"ou read", nil, []string{"slotd/role/read"}, "read"},
		{"uri and ou union", []string{"spiffe://slotd/role/store"}, []string{"slotd/role/admin"}, "admin,store"},
		{"other trust domain", []string{"spiffe://other/role/admin"}, []string{"other/role/admin"}, "no role"},
		{"other scheme", []string{"https://slotd/role/admin"}, nil, "no role"},
		{"unknown role", []string{"spiffe://slotd/role/root"}, []string{"slotd/role/root"}, "no role"},
		{"query smuggling", []string{"spiffe://slotd/role/admin?x=1"}, nil, "no role"},
		{"plain ou", nil, []string{"admin"}, "no role"},
		{"nested path", []string{"spiffe://slotd/role/admin/extra"}, nil, "no role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{OrganizationalUnit: tc.ous}}
			for _, s := range tc.uris {
				c.URIs = append(c.URIs, u(s))
			}
			if got := CertRoles(c, "slotd").String(); got != tc.want {
				t.Fatalf("CertRoles = %s, want %s", got, tc.want)
			}
		})
	}
	// devca writes the same URIs this package reads.
	for _, r := range allRoles {
		if got, want := devca.RoleURI(DefaultTrustDomain, string(r)).String(), RoleURI(DefaultTrustDomain, r); got != want {
			t.Errorf("devca.RoleURI = %s, auth.RoleURI = %s", got, want)
		}
	}
}

func TestParseTokenNodes(t *testing.T) {
	const tok = "0123456789abcdef0123"
	es, err := parseTokens("tokens.txt", []byte(tok+" store,read,node:n1,node:n-2 s1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].roles.String() != "read,store" || strings.Join(es[0].nodes, " ") != "n1 n-2" {
		t.Fatalf("entry %+v", es)
	}
	for _, bad := range []string{" store,node:\n", " store,node:a/b\n"} {
		if _, err := parseTokens("tokens.txt", []byte(tok+bad)); !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), "is not node:<id>") {
			t.Errorf("%q: err = %v, want ErrTokenFile naming node:<id>", bad, err)
		}
	}
}

func TestCertNodes(t *testing.T) {
	tests := []struct {
		name string
		uris []string
		want string
	}{
		{"one node", []string{"spiffe://slotd/role/store", "spiffe://slotd/node/n1"}, "n1"},
		{"two nodes", []string{"spiffe://slotd/node/n1", "spiffe://slotd/node/n2"}, "n1 n2"},
		{"no node", []string{"spiffe://slotd/role/store"}, ""},
		{"other trust domain", []string{"spiffe://other/node/n1"}, ""},
		{"other scheme", []string{"https://slotd/node/n1"}, ""},
		{"empty id", []string{"spiffe://slotd/node/"}, ""},
		{"nested path", []string{"spiffe://slotd/node/n1/x"}, ""},
		{"query smuggling", []string{"spiffe://slotd/node/n1?x=1"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &x509.Certificate{SerialNumber: big.NewInt(1)}
			for _, s := range tc.uris {
				u, err := url.Parse(s)
				if err != nil {
					t.Fatal(err)
				}
				c.URIs = append(c.URIs, u)
			}
			if got := strings.Join(CertNodes(c, "slotd"), " "); got != tc.want {
				t.Fatalf("CertNodes = %q, want %q", got, tc.want)
			}
		})
	}
	if got := NodeURI("slotd", "n1"); got != "spiffe://slotd/node/n1" {
		t.Errorf("NodeURI = %s", got)
	}
	// devca writes the same node URIs this package reads.
	if got, want := devca.NodeURI(DefaultTrustDomain, "n1").String(), NodeURI(DefaultTrustDomain, "n1"); got != want {
		t.Errorf("devca.NodeURI = %s, auth.NodeURI = %s", got, want)
	}
}

func TestCheckNode(t *testing.T) {
	with := func(id Identity) context.Context { return context.WithValue(context.Background(), identityKey{}, id) }
	store := NewRoleSet(RoleStore, RoleRead)
	tests := []struct {
		name string
		ctx  context.Context
		node string
		ok   bool
	}{
		{"authorization off", context.Background(), "n2", true},
		{"admin registers anyone", with(Identity{Name: "admin", Roles: NewRoleSet(RoleAdmin), nodeRequired: true}), "n2", true},
		{"bound, own node", with(Identity{Name: "s1", Roles: store, Nodes: []string{"n1"}}), "n1", true},
		{"bound, other node", with(Identity{Name: "s1", Roles: store, Nodes: []string{"n1"}}), "n2", false},
		{"bound twice", with(Identity{Name: "s1", Roles: store, Nodes: []string{"n1", "n2"}}), "n2", true},
		{"unbound, not required", with(Identity{Name: "s", Roles: store}), "n2", true},
		{"unbound, required", with(Identity{Name: "s", Roles: store, nodeRequired: true}), "n2", false},
		{"bound, required", with(Identity{Name: "s1", Roles: store, Nodes: []string{"n1"}, nodeRequired: true}), "n1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckNode(tc.ctx, tc.node)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrNotThisNode)) {
				t.Fatalf("CheckNode(%s) = %v, want ok=%v", tc.node, err, tc.ok)
			}
		})
	}
}
