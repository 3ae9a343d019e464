package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newMigrateCmd) }

// migrateJSON is `slotctl migrate -o json`:
//
//	{"health": "serving", "version": 12, "applied_by": "slotd at start",
//	 "note": "slotd applies pending directory schema migrations when it starts ..."}
//
// health is slotd's gRPC health: "serving" means its etcd answers and the
// directory schema is one it supports (migrations done); "not_serving"
// otherwise; "unknown" when the server has no health service.
type migrateJSON struct {
	Health    string `json:"health"`
	Version   uint64 `json:"version"`
	AppliedBy string `json:"applied_by"`
	Note      string `json:"note"`
}

// migrateNote is why slotctl has nothing to apply: the API has no schema
// call, by design slotd migrates before it serves.
const migrateNote = "slotd applies pending directory schema migrations when it starts (under an etcd lock, " +
	"so replicas apply each step once) and refuses to run against a newer schema than it knows; " +
	"to migrate, restart slotd with the new binary"

func newMigrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Show whether slotd's directory schema is migrated and serving",
		Long: `migrate reports the directory schema status as slotd sees it. slotd applies
schema migrations itself when it starts and offers no call to apply them, so
there is nothing for slotctl to run: upgrade by restarting slotd with the new
binary, one replica at a time. Exit 0 when slotd is serving, 1 otherwise.`,
		Example: `  slotctl migrate
  slotctl migrate -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				out := migrateJSON{Health: "unknown", AppliedBy: "slotd at start", Note: migrateNote}
				h, err := healthpb.NewHealthClient(c.cc).Check(cctx, &healthpb.HealthCheckRequest{})
				switch {
				case err == nil:
					out.Health = enumName(h.GetStatus(), "")
				case status.Code(err) != codes.Unimplemented:
					return err
				}
				st, err := c.admin.Status(cctx, &slotdv1.StatusRequest{})
				if err != nil {
					return err
				}
				out.Version = st.GetVersion()
				if err := g.print(out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "slotd health: %s, directory version %d\n%s\n", out.Health, out.Version, out.Note)
					return err
				}); err != nil {
					return err
				}
				if out.Health == "not_serving" {
					return fmt.Errorf("slotd is not serving: its etcd is unreachable or its schema is not one it supports; see slotd's log")
				}
				return nil
			})
		},
	}
}
