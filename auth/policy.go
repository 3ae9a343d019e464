package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
)

// ErrPolicy is returned by Policy.Validate for a rule that cannot be used.
var ErrPolicy = errors.New("auth: bad policy")

// Policy maps gRPC full method names to the roles that may call them. Build
// it once at startup; it is read-only (and safe for concurrent use) after.
//
// Patterns are a full method ("/slotd.v1.Admin/Apply") or a whole service
// ("/slotd.v1.Admin/*"). A method rule wins over its service rule. A method
// with no rule is denied to everyone: a new RPC is closed until someone
// decides who may call it.
type Policy struct {
	methods  map[string]rule // "/pkg.Svc/Method"
	services map[string]rule // "/pkg.Svc/"
	errs     []error
}

type rule struct {
	public bool
	roles  []Role // any one suffices
}

// NewPolicy returns an empty policy (everything denied).
func NewPolicy() *Policy {
	return &Policy{methods: map[string]rule{}, services: map[string]rule{}}
}

// Require lets callers holding any of roles call the methods matching
// pattern. Mistakes are collected and reported by Validate (and New), so
// rules can be chained.
func (p *Policy) Require(pattern string, roles ...Role) *Policy {
	if len(roles) == 0 {
		p.errs = append(p.errs, fmt.Errorf("%w: %s: no role given", ErrPolicy, pattern))
		return p
	}
	for _, r := range roles {
		if _, err := ParseRole(string(r)); err != nil {
			p.errs = append(p.errs, fmt.Errorf("%w: %s: %w", ErrPolicy, pattern, err))
			return p
		}
	}
	p.add(pattern, rule{roles: append([]Role(nil), roles...)})
	return p
}

// Public lets anyone call the methods matching pattern, without a
// certificate or token (for example the gRPC health service).
func (p *Policy) Public(pattern string) *Policy {
	p.add(pattern, rule{public: true})
	return p
}

func (p *Policy) add(pattern string, r rule) {
	key, service, err := parsePattern(pattern)
	if err != nil {
		p.errs = append(p.errs, err)
		return
	}
	m := p.methods
	if service {
		m = p.services
	}
	if _, dup := m[key]; dup {
		p.errs = append(p.errs, fmt.Errorf("%w: %s has two rules", ErrPolicy, pattern))
		return
	}
	m[key] = r
}

// parsePattern returns the map key for "/svc/Method" or "/svc/*".
func parsePattern(pattern string) (key string, service bool, err error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(pattern, "/"), "/")
	if !strings.HasPrefix(pattern, "/") || !ok || svc == "" || method == "" || strings.Contains(method, "/") ||
		(strings.Contains(method, "*") && method != "*") {
		return "", false, fmt.Errorf("%w: pattern %q is not /package.Service/Method or /package.Service/*", ErrPolicy, pattern)
	}
	if method == "*" {
		return "/" + svc + "/", true, nil
	}
	return pattern, false, nil
}

// Validate reports every mistake made while building the policy, joined.
func (p *Policy) Validate() error {
	return errors.Join(p.errs...)
}

// lookup returns the rule for a full method name.
func (p *Policy) lookup(fullMethod string) (rule, bool) {
	if r, ok := p.methods[fullMethod]; ok {
		return r, true
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		if r, ok := p.services[fullMethod[:i+1]]; ok {
			return r, true
		}
	}
	return rule{}, false
}

// Roles returns the roles that may call fullMethod (any one suffices),
// whether it is public, and whether any rule matched.
func (p *Policy) Roles(fullMethod string) (roles []Role, public, ok bool) {
	r, ok := p.lookup(fullMethod)
	return append([]Role(nil), r.roles...), r.public, ok
}

// Uncovered lists, sorted, the methods registered on a server that no rule
// matches (and that are therefore denied to everyone). Call it at startup
// with grpc.Server.GetServiceInfo() to catch a new RPC nobody gave a rule:
//
//	if m := policy.Uncovered(srv.GetServiceInfo()); len(m) > 0 { return fmt.Errorf("no auth rule for %v", m) }
func (p *Policy) Uncovered(services map[string]grpc.ServiceInfo) []string {
	var out []string
	for svc, info := range services {
		for _, m := range info.Methods {
			full := "/" + svc + "/" + m.Name
			if _, ok := p.lookup(full); !ok {
				out = append(out, full)
			}
		}
	}
	slices.Sort(out)
	return out
}
