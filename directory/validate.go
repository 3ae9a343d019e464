package directory

import (
	"fmt"
	"net"
	"strconv"
)

// Input limits. They keep records small and ids safe to embed in keys.
const (
	maxIDLen   = 64
	maxTextLen = 1024 // Reason
	maxByLen   = 256  // By
	maxWeight  = 1 << 20
	maxZoneLen = 64
	maxAddrLen = 256
	maxVNodes  = 1 << 12
)

// checkID accepts 1-64 characters of [A-Za-z0-9._-] starting with a letter
// or digit: safe as the last element of an etcd key and in a log line. No
// ':' so that a node id cannot be a host:port (ids are names, never
// addresses).
func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("%w: %s %.20q... is longer than %d bytes", ErrInvalid, what, id, maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%w: %s %q: use letters, digits and . _ - (starting with a letter or digit)", ErrInvalid, what, id)
		}
	}
	return nil
}

func checkAddr(addr string) error {
	if len(addr) > maxAddrLen {
		return fmt.Errorf("%w: address is longer than %d bytes", ErrInvalid, maxAddrLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("%w: address %q is not host:port", ErrInvalid, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%w: address %q has no valid port", ErrInvalid, addr)
	}
	return nil
}

func checkWeight(w int) error {
	if w <= 0 || w > maxWeight {
		return fmt.Errorf("%w: weight %d is not in 1-%d", ErrInvalid, w, maxWeight)
	}
	return nil
}

func checkZone(z string) error {
	if z == "" {
		return nil
	}
	if len(z) > maxZoneLen {
		return fmt.Errorf("%w: zone is longer than %d bytes", ErrInvalid, maxZoneLen)
	}
	return checkID("zone", z)
}

func checkText(reason, by string) error {
	if len(reason) > maxTextLen {
		return fmt.Errorf("%w: reason is longer than %d bytes", ErrInvalid, maxTextLen)
	}
	if len(by) > maxByLen {
		return fmt.Errorf("%w: by is longer than %d bytes", ErrInvalid, maxByLen)
	}
	return nil
}

// checkNode validates a node given to RegisterNode or Bootstrap.
func checkNode(n Node) error {
	if err := checkID("node id", n.ID); err != nil {
		return err
	}
	if err := checkAddr(n.Addr); err != nil {
		return fmt.Errorf("node %q: %w", n.ID, err)
	}
	if err := checkZone(n.Zone); err != nil {
		return fmt.Errorf("node %q: %w", n.ID, err)
	}
	if err := checkWeight(n.Weight); err != nil {
		return fmt.Errorf("node %q: %w", n.ID, err)
	}
	return nil
}
