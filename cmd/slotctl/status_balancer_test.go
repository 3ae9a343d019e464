package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/load"
)

// TestBalancerLine: the balancer's line in `slotctl status`, from the
// response `slotctl auto status` reads (or the error reading it).
func TestBalancerLine(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 1, 0, 0, time.UTC)
	ts := func(hms string) *timestamppb.Timestamp {
		at, err := time.Parse(time.TimeOnly, hms)
		if err != nil {
			t.Fatal(err)
		}
		return timestamppb.New(time.Date(2026, 1, 2, at.Hour(), at.Minute(), at.Second(), 123456789, time.UTC))
	}
	on := func(st *slotdv1.AutoState) *slotdv1.AutoStatusResponse {
		return &slotdv1.AutoStatusResponse{
			Policy: &slotdv1.AutoPolicy{Enabled: true, Interval: durationpb.New(5 * time.Minute), UpdatedBy: "alice", Updated: ts("11:00:00")},
			State:  st,
		}
	}
	cases := []struct {
		name string
		resp *slotdv1.AutoStatusResponse
		err  error
		want string
	}{
		{name: "off", resp: &slotdv1.AutoStatusResponse{
			Policy: &slotdv1.AutoPolicy{Interval: durationpb.New(5 * time.Minute)},
			// The stored state of a balancer since turned off is not shown.
			State: &slotdv1.AutoState{State: "off", Decision: "balanced within 10%", DecidedAt: ts("11:59:00"), LastPlan: "p-7", LastPlanAt: ts("12:00:03")},
		}, want: "balancer: off"},
		{name: "on after an automatic plan", resp: on(&slotdv1.AutoState{
			State: "waiting", Decision: "plan p-7-ab is applying (by auto)", DecidedAt: ts("12:00:08"),
			LastPlan: "p-7-ab", LastPlanAt: ts("12:00:03"), Leader: "s1",
		}), want: `balancer: on, waiting; last decision 2026-01-02T12:00:08Z "plan p-7-ab is applying (by auto)"; ` +
			`last plan p-7-ab at 2026-01-02T12:00:03Z; next check 2026-01-02T12:05:03Z`},
		{name: "on, the interval since its last plan over", resp: on(&slotdv1.AutoState{
			State: "watching", Decision: "n2 bytes ratio 1.32 > 1.10 for 4m of 10m", DecidedAt: ts("11:50:00"),
			LastPlan: "p-5-cd", LastPlanAt: ts("11:00:03"),
		}), want: `balancer: on, watching; last decision 2026-01-02T11:50:00Z "n2 bytes ratio 1.32 > 1.10 for 4m of 10m"; last plan p-5-cd at 2026-01-02T11:00:03Z`},
		{name: "on, never planned", resp: on(&slotdv1.AutoState{
			State: "watching", Decision: "balanced within 10%", DecidedAt: ts("11:00:05"),
		}), want: `balancer: on, watching; last decision 2026-01-02T11:00:05Z "balanced within 10%"`},
		{name: "on, backing off", resp: on(&slotdv1.AutoState{
			State: "backoff", Decision: "automatic plan p-7-ab paused: copy failed; backing off 10m (failure 1)", DecidedAt: ts("12:00:30"),
			Failures: 1, BackoffUntil: ts("12:10:30"), Backoff: durationpb.New(9*time.Minute + 30*time.Second),
			LastPlan: "p-7-ab", LastPlanAt: ts("12:00:03"),
		}), want: `balancer: on, backoff; last decision 2026-01-02T12:00:30Z "automatic plan p-7-ab paused: copy failed; backing off 10m (failure 1)"; ` +
			`last plan p-7-ab at 2026-01-02T12:00:03Z; next check 2026-01-02T12:10:30Z`},
		{name: "on, no leader has decided yet", resp: on(&slotdv1.AutoState{
			State: "starting", Decision: "on: the leader's balancer decides at its next tick", DecidedAt: ts("09:00:00"),
		}), want: `balancer: on, starting; last decision "on: the leader's balancer decides at its next tick"`},
		{name: "frozen", resp: &slotdv1.AutoStatusResponse{
			Policy: &slotdv1.AutoPolicy{Enabled: true, Frozen: true, Interval: durationpb.New(5 * time.Minute),
				UpdatedBy: "alice", Updated: ts("11:58:00"), Reason: "incident 4711"},
			State: &slotdv1.AutoState{State: "frozen", Decision: "balanced within 10%", LastPlan: "p-7", LastPlanAt: ts("12:00:03")},
		}, want: `balancer: frozen, no new automatic plan; policy changed 2026-01-02T11:58:00Z by alice ("incident 4711")`},
		{name: "unknown: an older slotd", err: status.Error(codes.Unimplemented, "unknown service slotd.v1.Auto"),
			want: "balancer: unknown (this slotd does not offer its status: older server?)"},
		{name: "unknown: refused", err: status.Error(codes.PermissionDenied, "role read required"),
			want: "balancer: unknown (refused: role read required)"},
		{name: "unknown: no answer", err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			want: "balancer: unknown (no answer in time)"},
		{name: "unknown: the server gave up first", err: status.Error(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL"),
			want: "balancer: unknown (no answer in time)"},
		{name: "unknown: not a status", err: errors.New("boom"), want: "balancer: unknown (boom)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a *autoJSON
			if tc.resp != nil {
				j := autoOf(tc.resp, now)
				a = &j
			}
			if got := balancerLine(a, tc.err); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestStatusBalancer: status prints the balancer's line before the plan's,
// and its JSON carries auto status's object, null when unknown.
func TestStatusBalancer(t *testing.T) {
	st := &slotdv1.StatusResponse{Version: 7, Server: "s1"}
	a := autoOf(&slotdv1.AutoStatusResponse{Policy: &slotdv1.AutoPolicy{Enabled: true}, State: &slotdv1.AutoState{State: "watching", Decision: "balanced within 10%"}}, time.Now())
	out, g := capture("table")
	if err := g.printStatus(st, nil, load.View{}, &a, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nbalancer: on, watching; last decision \"balanced within 10%\"\n\nno plan applying\n") {
		t.Fatalf("status:\n%s", out)
	}
	out, g = capture("json")
	if err := g.printStatus(st, nil, load.View{}, &a, nil); err != nil {
		t.Fatal(err)
	}
	var got statusJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Balancer == nil || *got.Balancer != a {
		t.Fatalf("json %s: %v", out, err)
	}
	out, g = capture("json")
	if err := g.printStatus(st, nil, load.View{}, nil, status.Error(codes.Unimplemented, "no")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"balancer": null`) {
		t.Fatalf("json without the balancer: %s", out)
	}
}

// oldAdmin is a slotd's Admin service with Status alone.
type oldAdmin struct {
	slotdv1.UnimplementedAdminServer
}

func (oldAdmin) Status(context.Context, *slotdv1.StatusRequest) (*slotdv1.StatusResponse, error) {
	return &slotdv1.StatusResponse{Version: 3, Server: "old", Nodes: []*slotdv1.NodeLoad{
		{Node: &slotdv1.Node{Id: "n1", Address: "127.0.0.1:7501", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE}, Slots: 16384, TargetSlots: 16384, Load: 1},
	}}, nil
}

// refusingAuto refuses every call, as a slotd whose roles do not let the
// caller read the balancer would.
type refusingAuto struct {
	slotdv1.UnimplementedAutoServer
}

func (refusingAuto) Status(context.Context, *slotdv1.AutoStatusRequest) (*slotdv1.AutoStatusResponse, error) {
	return nil, status.Error(codes.PermissionDenied, "role read required")
}

// slowAuto answers no call before its caller gives up.
type slowAuto struct {
	slotdv1.UnimplementedAutoServer
}

func (slowAuto) Status(ctx context.Context, _ *slotdv1.AutoStatusRequest) (*slotdv1.AutoStatusResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStatusWithoutBalancer: against a slotd that has no Auto service (an
// older one), refuses its call or does not answer it in time, status
// prints everything else, says why the balancer is unknown, prints null in
// JSON and exits 0.
func TestStatusWithoutBalancer(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		auto       slotdv1.AutoServer
	}{
		{"older slotd", "balancer: unknown (this slotd does not offer its status: older server?)", nil},
		{"refused", "balancer: unknown (refused: role read required)", refusingAuto{}},
		{"no answer", "balancer: unknown (no answer in time)", slowAuto{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer()
			slotdv1.RegisterAdminServer(srv, oldAdmin{})
			if tc.auto != nil {
				slotdv1.RegisterAutoServer(srv, tc.auto)
			}
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			s := &testSlotd{addr: lis.Addr().String()}

			out := s.ok(t, "--timeout", "1s", "status")
			for _, want := range []string{"version 3, server old", "n1    127.0.0.1:7501", "\n" + tc.want + "\n", "no plan applying"} {
				if !strings.Contains(out, want) {
					t.Errorf("status lacks %q:\n%s", want, out)
				}
			}
			var got map[string]json.RawMessage
			decode(t, s.ok(t, "--timeout", "1s", "status", "-o", "json"), &got)
			if b, ok := got["balancer"]; !ok || string(b) != "null" || got["version"] == nil {
				t.Errorf("status -o json: balancer %s, want null; %v", b, got)
			}
		})
	}
}

// TestStatusBalancerAgainstSlotd: status follows the policy `slotctl auto`
// changes (no mover here, so no balancer decides).
func TestStatusBalancerAgainstSlotd(t *testing.T) {
	s := startSlotd(t, false)
	s.demo(t)
	line := func() string {
		t.Helper()
		for l := range strings.Lines(s.ok(t, "status")) {
			if strings.HasPrefix(l, "balancer: ") {
				return strings.TrimSpace(elideTimes(l))
			}
		}
		t.Fatal("status prints no balancer line")
		return ""
	}
	if got := line(); got != "balancer: off" {
		t.Fatalf("default: %s", got)
	}
	s.ok(t, "auto", "on", "--reason", "scale-out week")
	if got, want := line(), `balancer: on, starting; last decision "on: the leader's balancer decides at its next tick"`; got != want {
		t.Fatalf("after on:\ngot  %s\nwant %s", got, want)
	}
	s.ok(t, "auto", "freeze", "--reason", "incident 4711")
	if got, want := line(), `balancer: frozen, no new automatic plan; policy changed YYYY-MM-DDTHH:MM:SSZ by tester ("incident 4711")`; got != want {
		t.Fatalf("after freeze:\ngot  %s\nwant %s", got, want)
	}
	var st statusJSON
	decode(t, s.ok(t, "status", "-o", "json"), &st)
	if b := st.Balancer; b == nil || !b.Policy.Enabled || !b.Policy.Frozen || b.State.State != "frozen" || b.Policy.Reason != "incident 4711" || b.State.NextCheck != "" {
		t.Fatalf("status -o json balancer: %+v", b)
	}
}
