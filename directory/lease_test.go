package directory

import (
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/slots"
)

func TestLeaseGrantRenewRefuse(t *testing.T) {
	clock := newFakeClock()
	c, d, _ := setup(t, 2, func(c *Config) { c.Now = clock.Now; c.DownAfter = 3 * time.Second })
	ctx := testCtx(t)
	cli := c.Client()

	l1, err := d.GrantLease(ctx, "n0", Registrant{})
	if err != nil {
		t.Fatal(err)
	}
	if l1.TTL != 3*time.Second || l1.Margin != 300*time.Millisecond || !l1.Granted.Equal(clock.Now()) {
		t.Fatalf("lease = %+v, want TTL 3s, margin 300ms, granted now", l1)
	}
	// etcd keeps the key for at least TTL + margin after a renewal.
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(l1.ID))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL < 4 {
		t.Fatalf("etcd lease TTL %ds, want at least ceil(3.3s) = 4s", ttl.GrantedTTL)
	}
	if _, err := d.RenewLease(ctx, "n0", l1.ID); err != nil {
		t.Fatalf("renew the current lease: %v", err)
	}

	tests := []struct {
		name  string
		id    string
		lease LeaseID
		want  error
	}{
		{"another lease id", "n0", l1.ID + 1, ErrLeaseExpired},
		{"another node's lease", "n1", l1.ID, ErrLeaseExpired},
		{"an unknown node", "nosuch", l1.ID, ErrNotFound},
		{"a bad id", "", l1.ID, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := d.RenewLease(ctx, tc.id, tc.lease); !errors.Is(err, tc.want) {
				t.Fatalf("renew: err = %v, want %v", err, tc.want)
			}
		})
	}
	if live, err := d.Liveness(ctx); err != nil || !live["n1"].LastHeartbeat.IsZero() {
		t.Fatalf("a refused renewal gave n1 a lease: %+v %v", live["n1"], err)
	}

	// A registration again replaces the lease and keeps the run.
	clock.Advance(time.Second)
	l2, err := d.GrantLease(ctx, "n0", Registrant{})
	if err != nil {
		t.Fatal(err)
	}
	if l2.ID == l1.ID || !l2.Granted.Equal(clock.Now()) {
		t.Fatalf("second grant = %+v, first %+v", l2, l1)
	}
	if _, err := d.RenewLease(ctx, "n0", l1.ID); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("renew a replaced lease: err = %v, want ErrLeaseExpired", err)
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(l1.ID)); err != nil || ttl.TTL > 0 {
		t.Fatalf("the replaced lease is still live: %+v %v", ttl, err)
	}
	live, err := d.Liveness(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n0 := live["n0"]
	if !n0.RunSince.Equal(l1.Granted) || !n0.LeaseGranted.Equal(l2.Granted) {
		t.Fatalf("liveness after a second grant: %+v, want run since %s and lease granted %s", n0, l1.Granted, l2.Granted)
	}
	if got := n0.LeaseExpires.Sub(n0.LastHeartbeat); got != 2700*time.Millisecond {
		t.Fatalf("lease expires %v after the last heartbeat, want TTL - margin = 2.7s", got)
	}

	// A lease that ran out is not renewed, and no lease is made in its place.
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(l2.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RenewLease(ctx, "n0", l2.ID); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("renew an expired lease: err = %v, want ErrLeaseExpired", err)
	}
	if live, err := d.Liveness(ctx); err != nil || !live["n0"].LastHeartbeat.IsZero() {
		t.Fatalf("a late renewal brought the lease back: %+v %v", live["n0"], err)
	}
}

// TestFailNodeNeedsExpiredLease: a down node that holds a lease again (it
// re-registered) may be serving: declaring it failed is refused until the
// lease is gone, and then applies.
func TestFailNodeNeedsExpiredLease(t *testing.T) {
	clock := newFakeClock()
	c, d, snap := setup(t, 3, func(c *Config) { c.Now = clock.Now; c.DownAfter = 2 * time.Second; c.HoldDown = time.Minute })
	ctx := testCtx(t)
	heartbeat(t, d, "n0")
	heartbeat(t, d, "n1")
	clock.Advance(2 * time.Second)
	checkLiveness(t, d)
	if s := nodeState(t, d, "n2"); s != NodeDown {
		t.Fatalf("n2 is %s, want down", s)
	}
	clock.Advance(time.Minute)
	lease, err := d.GrantLease(ctx, "n2", Registrant{}) // it comes back: still down for the hold-down
	if err != nil {
		t.Fatal(err)
	}
	owners := map[slots.Slot]string{}
	for i := range slots.Count {
		if snap.Owner(slots.MustNew(i)) == "n2" {
			owners[slots.MustNew(i)] = "n0"
		}
	}
	spec := FailSpec{Node: "n2", Owners: owners, By: "test"}
	_, err = d.FailNode(ctx, spec)
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "live lease") {
		t.Fatalf("fail a node holding a lease: err = %v, want ErrPrecondition naming the lease", err)
	}
	if after, err := d.Snapshot(ctx); err != nil || after.Version != snap.Version+1 {
		t.Fatalf("a refused fail changed the directory: %v", err) // +1: n2 marked down
	}
	if _, err := c.Client().Revoke(ctx, clientv3.LeaseID(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.FailNode(ctx, spec); err != nil {
		t.Fatalf("fail once the lease is gone: %v", err)
	}
}

func TestLeaseMarginConfig(t *testing.T) {
	tests := []struct {
		name      string
		downAfter time.Duration
		margin    time.Duration
		want      time.Duration // 0: invalid
	}{
		{"default is a tenth", 10 * time.Second, 0, time.Second},
		{"explicit", 3 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond},
		{"half is too much", 2 * time.Second, time.Second, 0},
		{"negative", 2 * time.Second, -time.Second, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Client: &clientv3.Client{}, DownAfter: tc.downAfter, LeaseMargin: tc.margin}
			err := cfg.Validate()
			if tc.want == 0 {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Validate = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.withDefaults().LeaseMargin; got != tc.want {
				t.Fatalf("margin %v, want %v", got, tc.want)
			}
		})
	}
}
