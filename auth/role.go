package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Role is a named set of permissions a caller holds.
type Role string

const (
	// RoleRead reads and watches the map (Directory service).
	RoleRead Role = "read"
	// RoleAdmin changes the cluster: nodes, plans, throttle, moves,
	// rollback, bootstrap. It implies RoleRead.
	RoleAdmin Role = "admin"
	// RoleStore speaks the migration protocol between slotd and store nodes
	// and registers/heartbeats nodes. It does not imply RoleRead: a store
	// node that watches the map needs both (devca's store cert has both).
	RoleStore Role = "store"
)

// ErrUnknownRole is returned for a role name that is not read, admin or store.
var ErrUnknownRole = errors.New("auth: unknown role")

// allRoles is in bit order.
var allRoles = [...]Role{RoleRead, RoleAdmin, RoleStore}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	for _, r := range allRoles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w %q (want read, admin or store)", ErrUnknownRole, s)
}

func (r Role) bit() RoleSet {
	for i, x := range allRoles {
		if x == r {
			return 1 << i
		}
	}
	return 0
}

// RoleSet is the set of roles a caller holds. The zero value is empty.
type RoleSet uint8

// NewRoleSet returns the set of rs; unknown roles are left out.
func NewRoleSet(rs ...Role) RoleSet {
	var s RoleSet
	for _, r := range rs {
		s |= r.bit()
	}
	return s
}

// Has reports whether r is in the set itself.
func (s RoleSet) Has(r Role) bool { b := r.bit(); return b != 0 && s&b != 0 }

// Grants reports whether the set allows what r allows: it holds r, or admin
// when r is read.
func (s RoleSet) Grants(r Role) bool {
	return s.Has(r) || (r == RoleRead && s.Has(RoleAdmin))
}

// Roles lists the set in a fixed order (read, admin, store).
func (s RoleSet) Roles() []Role {
	var out []Role
	for _, r := range allRoles {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// String is "read,admin", or "no role" for the empty set.
func (s RoleSet) String() string {
	rs := s.Roles()
	if len(rs) == 0 {
		return "no role"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = string(r)
	}
	return strings.Join(parts, ",")
}
