package main

import (
	"net"
	"strconv"
	"strings"

	"github.com/slotd/slotd/api/slotdv1"
)

// maxWeight bounds a weight given on the command line; far above any sane
// ratio, far below where slot targets would overflow.
const maxWeight = 1 << 20

// parseNodeSpec reads ID=ADDR[,zone=Z][,weight=W], as init, plan --add and
// nodes add take it. Weight stays 0 when not given, which slotd reads as 1
// for a new node and as "keep its weight" for a node that registered itself.
func parseNodeSpec(s string) (*slotdv1.NodeSpec, error) {
	const form = "want ID=HOST:PORT[,zone=Z][,weight=W], e.g. n4=127.0.0.1:7504,zone=a"
	parts := strings.Split(s, ",")
	id, addr, ok := strings.Cut(parts[0], "=")
	if !ok {
		return nil, usagef("node %q: %s", s, form)
	}
	if err := checkNodeID(id); err != nil {
		return nil, err
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return nil, usagef("node %q: address %q is not host:port; %s", s, addr, form)
	}
	n := &slotdv1.NodeSpec{Id: id, Address: addr}
	seen := map[string]bool{}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return nil, usagef("node %q: bad or repeated option %q; %s", s, kv, form)
		}
		seen[k] = true
		switch k {
		case "zone":
			if v == "" {
				return nil, usagef("node %q: zone is empty", s)
			}
			n.Zone = v
		case "weight":
			w, err := parseWeight(v)
			if err != nil {
				return nil, usagef("node %q: %v", s, err)
			}
			if w == 0 {
				return nil, usagef("node %q: weight 0 would own nothing; give a weight of at least 1", s)
			}
			n.Weight = w
		default:
			return nil, usagef("node %q: unknown option %q (zone, weight); %s", s, k, form)
		}
	}
	return n, nil
}

// checkNodeID refuses ids the directory would refuse, before anything is sent.
func checkNodeID(id string) error {
	switch {
	case id == "":
		return usagef("node id is empty")
	case strings.ContainsAny(id, ": /\t"):
		return usagef("node id %q must not contain ':', '/' or spaces (ids are names, never addresses)", id)
	}
	return nil
}

func parseWeight(v string) (uint32, error) {
	w, err := strconv.ParseUint(v, 10, 32)
	if err != nil || w > maxWeight {
		return 0, usagef("weight %q is not a whole number from 0 to %d", v, maxWeight)
	}
	return uint32(w), nil
}
