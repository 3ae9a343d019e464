package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/buildinfo"
)

func init() { register(newVersionCmd) }

// versionInfo is `slotctl version -o json`: slotctl's own build at the top
// level (as before servers were asked), the answering slotd's under server.
type versionInfo struct {
	Version string         `json:"version"`
	Commit  string         `json:"commit,omitempty"`
	Go      string         `json:"go"`
	Server  *serverVersion `json:"server,omitempty"`
}

type serverVersion struct {
	Version         string `json:"version"`
	Commit          string `json:"commit,omitempty"`
	Go              string `json:"go"`
	ServerID        string `json:"server_id"`
	DirectorySchema uint32 `json:"directory_schema"`
}

type versionOptions struct{ clientOnly bool }

func newVersionCmd(g *globals) *cobra.Command {
	var o versionOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the slotctl version and the version of the slotd that answers",
		Long: `version prints slotctl's build and asks slotd (slotd.v1.Info/GetVersion, read
role) for the build of the replica that answers. With --client it asks no one.
When slotd cannot be reached slotctl's version is still printed, and the
command fails.`,
		Example: "  slotctl version\n  slotctl version --client -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := buildinfo.Read()
			v := versionInfo{Version: b.Version, Commit: b.Commit, Go: b.Go}
			var serverErr error
			if !o.clientOnly {
				serverErr = g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
					cctx, cancel := g.call(ctx)
					defer cancel()
					r, err := slotdv1.NewInfoClient(c.cc).GetVersion(cctx, &slotdv1.GetVersionRequest{})
					if err != nil {
						return err
					}
					v.Server = &serverVersion{Version: r.GetVersion(), Commit: r.GetCommit(), Go: r.GetGo(),
						ServerID: r.GetServerId(), DirectorySchema: r.GetDirectorySchema()}
					return nil
				})
			}
			if err := g.print(v, func(w io.Writer) error {
				t := newTable(w, "", "VERSION", "COMMIT", "GO", "SERVER", "SCHEMA")
				t.row("slotctl", v.Version, dash(v.Commit), v.Go, "-", "-")
				if s := v.Server; s != nil {
					t.row("slotd", s.Version, dash(s.Commit), s.Go, s.ServerID, fmt.Sprint(s.DirectorySchema))
				}
				return t.flush()
			}); err != nil {
				return err
			}
			if serverErr != nil {
				return fmt.Errorf("slotd version: %w", serverErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.clientOnly, "client", false, "print slotctl's version only; contact no server")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
