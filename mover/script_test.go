package mover

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

var rewriteScripts = flag.Bool("rewrite", false, "rewrite the expected output of testdata/script/*.txt")

// TestScripts runs the executor's state machine from scripts, in the
// datadriven style: testdata/script/*.txt hold commands, each followed by
// "----" and the state it must leave (plan, results, moves in flight,
// owners). The executor is real (real etcd, real stores) but driven one
// scheduler step per command, so crashes and operator actions land exactly
// where the script says. -rewrite regenerates the expected output.
//
// Commands:
//
//	executor parallelism=N     a new executor (a leader change), default 1
//	plan moves=N               propose filling n4 with N moves
//	apply | resume | cancel    the operator's commands on the current plan
//	pause [abort]              likewise
//	rollback                   roll back the current plan (which it becomes)
//	step                       one scheduler step
//	steps                      steps until there is nothing to do
//	pause-during at=E [abort]  a step in which the operator pauses when the
//	                           first move reaches E (begun; fenced: the
//	                           source has fenced, nothing commits it yet)
//	crash at=E                 a step in which the leader dies at E
//	leader change              a new executor, nothing in memory
//	move                       `slotctl move` of n1's first slot to n4 on the
//	                           leader's slotd: the plan stored and its move
//	                           begun in one transaction (onemove.go), the
//	                           move handed to the leader's next step
//	state                      the state alone
//
// A mutant that ignores pause (go test -tags mutant_ignorepause) fails.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/script/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptEnv struct {
	t       *testing.T
	c       *cluster
	e       *Executor
	par     int
	leaders int
	plan    string
	// endTerm ends the current executor's term (its leadCtx), as losing
	// leadership would.
	endTerm context.CancelFunc
}

func runScript(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := &scriptEnv{t: t, c: newCluster(t, 3), par: 1}
	env.c.addNode("n4")
	env.newExecutor()
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	failed := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		// A command, "----", and its expected output up to a blank line.
		cmd := line
		var want []string
		if i+1 < len(lines) && lines[i+1] == "----" {
			i += 2
			for ; i < len(lines) && lines[i] != ""; i++ {
				want = append(want, lines[i])
			}
		}
		got := env.run(cmd)
		out.WriteString(cmd + "\n----\n" + got + "\n")
		if w := strings.Join(want, "\n") + "\n"; w != got && !*rewriteScripts {
			t.Errorf("%s: %s\n--- got\n%s--- want\n%s", filepath.Base(path), cmd, got, w)
			failed = true
		}
	}
	if *rewriteScripts {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Log("run with -rewrite if the new output is right")
	}
}

func (env *scriptEnv) newExecutor() {
	if env.endTerm != nil {
		env.endTerm()
		env.endTerm = nil
	}
	env.leaders++
	e, err := NewExecutor(ExecutorConfig{
		Directory: env.c.dir, Control: env.c.ctl, Etcd: env.c.etcd.Client(), Stores: env.c.pool,
		Name: fmt.Sprintf("leader%d", env.leaders), Logger: testLogger(), Backoff: 10 * time.Millisecond,
		Parallelism: env.par, DisableLiveness: true,
	})
	if err != nil {
		env.t.Fatal(err)
	}
	env.e = e
}

// run executes one command and returns the state after it.
func (env *scriptEnv) run(cmd string) string {
	c, ctl := env.c, env.c.ctl
	f := strings.Fields(cmd)
	args := map[string]string{}
	for _, a := range f[1:] {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	_, abort := args["abort"]
	var err error
	switch f[0] {
	case "executor":
		if n, perr := strconv.Atoi(args["parallelism"]); perr == nil {
			env.par = n
		}
		env.newExecutor()
	case "leader":
		env.newExecutor()
	case "plan":
		n, _ := strconv.Atoi(args["moves"])
		var p *Plan
		if p, err = ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: n, Operator: "script"}); err == nil {
			env.plan = p.ID
		}
	case "apply":
		_, err = ctl.Apply(c.ctx, env.plan, "script")
	case "pause":
		_, err = ctl.Pause(c.ctx, env.plan, abort, "script")
	case "resume":
		_, err = ctl.Resume(c.ctx, env.plan, "script")
	case "cancel":
		_, err = ctl.Cancel(c.ctx, env.plan, "script")
	case "rollback":
		var p *Plan
		if p, err = ctl.Rollback(c.ctx, env.plan, "script", ""); err == nil {
			env.plan = p.ID
		}
	case "step":
		_, err = env.e.step(c.ctx)
	case "steps":
		for range 100 {
			var worked bool
			if worked, err = env.e.step(c.ctx); err != nil || !worked {
				break
			}
		}
	case "pause-during":
		plan := env.plan
		env.e.hook = func(event string, _ directory.Move, g *planGuard) {
			if event != args["at"] || g == nil {
				return
			}
			env.e.hook = nil
			seen := g.seen.Load()
			if _, err := ctl.Pause(c.ctx, plan, abort, "script"); err != nil {
				env.t.Errorf("pause: %v", err)
			}
			env.e.planChanged(plan) // what the plan watch does
			waitfor.True(env.t, time.Minute, "the guard to look at the plan", func() bool { return g.seen.Load() > seen })
		}
		_, err = env.e.step(c.ctx)
		env.e.hook = nil
	case "crash":
		ctx, cancel := context.WithCancel(c.ctx)
		env.e.hook = func(event string, _ directory.Move, _ *planGuard) {
			if event == args["at"] {
				cancel() // the leader dies here: what it recorded stays
			}
		}
		_, err = env.e.step(ctx)
		cancel()
		env.e.hook = nil
		if ctx.Err() != nil {
			err = nil
		}
	case "move":
		var p *Plan
		if p, err = env.moveByLeader(); err == nil {
			env.plan = p.ID
		}
	case "state":
	default:
		env.t.Fatalf("unknown command %q", cmd)
	}
	if env.plan != "" {
		env.e.planChanged(env.plan) // what the leader's plan watch does
	}
	s := env.state()
	if err != nil {
		s = "error: " + err.Error() + "\n" + s
	}
	return s
}

// moveByLeader makes the executor lead (without an election: the
// script steps it) and has it store and begin a one-move plan of n1's
// first slot to n4, as Control.MoveSlot does on the leader's slotd.
func (env *scriptEnv) moveByLeader() (*Plan, error) {
	c, e := env.c, env.e
	if env.endTerm == nil {
		ctx, cancel := context.WithCancel(c.ctx)
		env.endTerm = cancel
		env.t.Cleanup(cancel)
		e.term.Add(1)
		e.leadCtx.Store(&ctx)
		e.leader.Store(true)
	}
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		return nil, err
	}
	e.latest.Store(snap)
	n1 := snap.SlotsOf("n1")
	p, err := c.ctl.onePlan(snap, n1.Ranges()[0].From, "n4", "script", "operator move")
	if err != nil {
		return nil, err
	}
	data, err := encodePlan(p)
	if err != nil {
		return nil, err
	}
	return p, e.beginOneMove(c.ctx, p.clone(), data, snap, 0)
}

// state prints the current plan with its results, the moves in flight and
// the new node's slots: what an operator would see.
func (env *scriptEnv) state() string {
	c := env.c
	var b strings.Builder
	if env.plan != "" {
		p, err := c.ctl.Get(c.ctx, env.plan)
		if err != nil {
			env.t.Fatal(err)
		}
		running, err := c.dir.Running(c.ctx, p.ID)
		if err != nil {
			env.t.Fatal(err)
		}
		kind := "plan"
		if p.RollbackOf != "" {
			kind = "rollback"
		}
		run := "no run key"
		if running {
			run = "run key"
		}
		pr := p.Progress()
		fmt.Fprintf(&b, "%s: %s (%s)\n", kind, p.State, run)
		fmt.Fprintf(&b, "moves: %d done, %d skipped, %d failed, %d aborted, %d pending\n", pr.Done, pr.Skipped, pr.Failed, pr.Aborted, pr.Pending)
	}
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		env.t.Fatal(err)
	}
	var moves []string
	for _, m := range snap.Moves {
		moves = append(moves, fmt.Sprintf("move %d %s", m.Index, m.Phase))
	}
	slices.Sort(moves)
	if len(moves) == 0 {
		moves = []string{"none"}
	}
	fmt.Fprintf(&b, "in flight: %s\n", strings.Join(moves, ", "))
	// Fences live on the stores; the directory records one only with the
	// commit, so this is where a fence left by a dead leader shows. A
	// source keeps the fence of a slot it handed off until its drop: only
	// an owner's fence refuses writes nobody else takes.
	var fenced []string
	for id, kn := range c.nodes {
		if kn.srv == nil {
			continue
		}
		n := 0
		for s := range slots.Count {
			if sl := slots.MustNew(s); snap.Owner(sl) == id && kn.srv.Node().Fenced(sl) {
				n++
			}
		}
		if n > 0 {
			fenced = append(fenced, fmt.Sprintf("%s %d owned slots", id, n))
		}
	}
	slices.Sort(fenced)
	if len(fenced) == 0 {
		fenced = []string{"none"}
	}
	fmt.Fprintf(&b, "fenced owners: %s\n", strings.Join(fenced, ", "))
	fmt.Fprintf(&b, "n4 owns %d slots\n", snap.Counts()["n4"])
	return b.String()
}
