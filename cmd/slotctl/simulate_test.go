package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/slotd/slotd/ringcompat"
)

var seed001Args = []string{"simulate", "--hash", "md5", "--keys", "100000", "--nodes", "4", "--add", "1", "--vnodes", "1,100"}

func TestSimulateGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"simulate_seed001_table.golden", seed001Args},
		{"simulate_seed001_json.golden", append([]string{"-o", "json"}, seed001Args...)},
		{"simulate_xxhash_table.golden", []string{"simulate", "--keys", "20000", "--nodes", "12", "--add", "2", "--vnodes", "128"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, tc.name, out)
		})
	}
}

// TestSimulateMD5Table checks the md5 ring simulation's published numbers
// through the JSON form, so that a golden rewrite cannot quietly change them.
func TestSimulateMD5Table(t *testing.T) {
	out, errOut, code := runCLI(t, append([]string{"-o", "json"}, seed001Args...)...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var res ringcompat.SimResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Keys != 100000 || res.Nodes != 4 || res.Add != 1 || res.Hash != "md5" {
		t.Fatalf("header %+v", res)
	}
	want := []struct {
		scheme   string
		vnodes   int
		moved    string
		min, max int
	}{
		{"mod N", 0, "79.9", 24851, 25194},
		{"ring", 1, "9.0", 10134, 42472},
		{"ring", 100, "22.4", 22248, 27397},
	}
	if len(res.Rows) != len(want)+1 {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(want)+1)
	}
	for i, w := range want {
		r := res.Rows[i]
		got := fmt.Sprintf("%s %d %.1f %d/%d", r.Scheme, r.VNodes, r.MovedPct, r.Before.Min, r.Before.Max)
		if exp := fmt.Sprintf("%s %d %s %d/%d", w.scheme, w.vnodes, w.moved, w.min, w.max); got != exp {
			t.Errorf("row %d: %s, want %s", i, got, exp)
		}
	}
	// Fixed slots move about the minimum, 1/5 of the keys, all to the new
	// server; the slots hold unequal key counts, hence the tolerance.
	fixed := res.Rows[3]
	if fixed.Scheme != "fixed slots" || !fixed.OnlyToNew || fixed.MovedPct < 19 || fixed.MovedPct > 21 {
		t.Errorf("fixed slots %+v, want about 20%% moved, only to the new server", fixed)
	}
}

func TestSimulateUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"zero keys", []string{"--keys", "0"}, "--keys 0"},
		{"negative keys", []string{"--keys", "-5"}, "--keys -5"},
		{"keys not a number", []string{"--keys", "many"}, "invalid argument"},
		{"zero nodes", []string{"--nodes", "0"}, "--nodes 0"},
		{"negative add", []string{"--add", "-1"}, "--add -1"},
		{"unknown hash", []string{"--hash", "sha1"}, `--hash "sha1"`},
		{"vnodes not numbers", []string{"--vnodes", "1,x"}, `--vnodes "1,x"`},
		{"vnodes zero", []string{"--vnodes", "0"}, `--vnodes "0"`},
		{"vnodes empty", []string{"--vnodes", ""}, `--vnodes ""`},
		{"vnodes trailing comma", []string{"--vnodes", "1,"}, `--vnodes "1,"`},
		{"too many points", []string{"--nodes", "10000", "--vnodes", "5000"}, "vnodes"},
		{"an argument", []string{"extra"}, "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"simulate"}, tc.args...)...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, tc.msg) || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d, one line containing %q", code, out, errOut, exitUsage, tc.msg)
			}
		})
	}
}

func TestSimulateHelpExample(t *testing.T) {
	out, _, code := runCLI(t, "simulate", "--help")
	if code != exitOK || !strings.Contains(out, "slotctl simulate --keys 100000 --nodes 4 --add 1 --vnodes 1,100 --hash md5") {
		t.Fatalf("exit %d, help without the md5 simulation example:\n%s", code, out)
	}
}
