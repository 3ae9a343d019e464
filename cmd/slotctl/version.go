package main

import (
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { register(newVersionCmd) }

type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the slotctl version",
		Example: "  slotctl version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := versionInfo{Version: buildVersion(), Go: runtime.Version()}
			return g.print(v, func(w io.Writer) error {
				t := newTable(w, "VERSION", "GO")
				t.row(v.Version, v.Go)
				return t.flush()
			})
		},
	}
}
