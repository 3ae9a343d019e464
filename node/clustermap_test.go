package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// TestClusterMapFollowsDirectory: a ClusterMap has no map while slotd is
// down, picks one up once slotd serves, and follows a move.
func TestClusterMapFollowsDirectory(t *testing.T) {
	nodes := []slotmap.Node{{ID: "a", Addr: "127.0.0.1:7501"}, {ID: "b", Addr: "127.0.0.1:7502"}}
	m1, err := maptest.RoundRobin(10, nodes)
	if err != nil {
		t.Fatal(err)
	}
	st := maptest.NewState(m1)
	srv, err := maptest.Start(st, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	srv.Stop() // slotd is down when the node starts

	cm, err := NewClusterMap(client.Options{Endpoints: []string{addr}, ReconnectBackoff: time.Millisecond, MaxReconnectBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cm.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	s := slots.MustNew(4) // a in the round robin
	if _, ok := cm.Owner(s); ok {
		t.Fatal("an owner before any map")
	}
	srv, err = maptest.Start(st, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitOwner := func(want Owner) {
		t.Helper()
		waitfor.Err(t, 20*time.Second, "the owner", func() error {
			if got, ok := cm.Owner(s); !ok || got != want {
				return fmt.Errorf("owner %+v (ok %v), want %+v", got, ok, want)
			}
			return nil
		})
	}
	waitOwner(Owner{ID: "a", Addr: "127.0.0.1:7501", Version: 10})
	m2, err := maptest.Move(m1, 11, s, "b")
	if err != nil {
		t.Fatal(err)
	}
	st.Set(m2)
	waitOwner(Owner{ID: "b", Addr: "127.0.0.1:7502", Version: 11})
}
