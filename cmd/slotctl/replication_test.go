package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestReplicationCommands: init --rf 3 bootstraps every slot on three
// zones; replication show prints the policy; set changes min-isr; every
// bad value is refused with one line and the exit code of its kind, and
// changes nothing.
func TestReplicationCommands(t *testing.T) {
	s := startSlotd(t, false)
	nodes := []string{"--node", "n1=127.0.0.1:7501,zone=a", "--node", "n2=127.0.0.1:7502,zone=b",
		"--node", "n3=127.0.0.1:7503,zone=c", "--node", "n4=127.0.0.1:7504,zone=c"}

	// A bootstrap over too few zones is refused and leaves rf 1.
	r := s.run(t, "", append([]string{"init", "--rf", "4", "--vnodes", "8"}, nodes...)...)
	if r.code != exitRefused || !strings.Contains(r.stderr, "rf 4 needs nodes in 4 zones") {
		t.Fatalf("init --rf 4 over three zones: exit %d, stderr %q", r.code, r.stderr)
	}
	var got replicationJSON
	show := func() replicationJSON {
		t.Helper()
		var out replicationJSON
		if err := json.Unmarshal([]byte(s.ok(t, "replication", "show", "-o", "json")), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got = show(); got.RF != 1 || got.Bootstrapped {
		t.Fatalf("after the refused init: %+v", got)
	}

	out := s.ok(t, append([]string{"init", "--rf", "3", "--vnodes", "8"}, nodes...)...)
	if !strings.Contains(out, "every slot on 3 replicas in distinct zones, min isr 2") {
		t.Fatalf("init --rf 3 output:\n%s", out)
	}
	got = show()
	if got.RF != 3 || got.MinISR != 2 || !got.Bootstrapped || !slices.Equal(got.Zones, []string{"a", "b", "c"}) || got.UnderReplicated != 0 {
		t.Fatalf("replication show: %+v", got)
	}
	table := s.ok(t, "replication", "show")
	for _, want := range []string{"rf", "3", "zones", "3: a, b, c", "under-replicated", "0 slots"} {
		if !strings.Contains(table, want) {
			t.Fatalf("replication show lacks %q:\n%s", want, table)
		}
	}

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"rf 0", []string{"rf=0"}, exitFailure, "rf 0 is not in 1-5"},
		{"rf 6", []string{"rf=6"}, exitFailure, "rf 6 is not in 1-5"},
		{"min-isr 0", []string{"min-isr=0"}, exitFailure, "min_isr 0"},
		{"min-isr above rf", []string{"min-isr=4"}, exitFailure, "min_isr 4"},
		{"rf above the zones", []string{"rf=4", "min-isr=2"}, exitRefused, "rf 4 needs 4 zones"},
		{"rf needs replicas removed", []string{"rf=2"}, exitRefused, "not run yet"},
		{"not a number", []string{"rf=three"}, exitUsage, "give a number"},
		{"unknown key", []string{"zones=3"}, exitUsage, "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.run(t, "", append([]string{"replication", "set"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("replication set %v: exit %d, stderr %q; want exit %d, one line with %q", tc.args, r.code, r.stderr, tc.code, tc.want)
			}
			if after := show(); after.RF != 3 || after.MinISR != 2 || after.Version != got.Version {
				t.Fatalf("a refusal changed the policy: %+v", after)
			}
		})
	}

	var set replicationJSON
	if err := json.Unmarshal([]byte(s.ok(t, "replication", "set", "min-isr=3", "--reason", "three zones ack", "-o", "json")), &set); err != nil {
		t.Fatal(err)
	}
	if set.MinISR != 3 || set.Changed == nil || !*set.Changed || set.Version != got.Version+1 {
		t.Fatalf("replication set min-isr=3: %+v", set)
	}
	if out := s.ok(t, "replication", "set", "rf=3"); !strings.Contains(out, "already") {
		t.Fatalf("replication set rf=3 again:\n%s", out)
	}
}
