// Package buildinfo says which build of slotd's programs is running: the
// module version Go stamps into the binary, the VCS commit it was built
// from and the Go release. slotd, slotkv and slotctl print it for
// --version, and slotd returns it from slotd.v1.Info/GetVersion.
//
// Usage:
//
//	fmt.Println("slotd", buildinfo.Read())  // slotd v0.0.0-... (commit 1db0181, go1.26.0)
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info describes one build.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version for a
	// build from a git checkout, or "(devel)" when Go stamped none.
	Version string `json:"version"`
	// Commit is the VCS revision (12 hex digits), "+dirty" when the tree
	// had uncommitted changes; empty when unknown (go test, go run).
	Commit string `json:"commit,omitempty"`
	// Go is the Go release that built the binary.
	Go string `json:"go"`
}

// Read returns the running binary's build information.
func Read() Info {
	in := Info{Version: "(devel)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if v := bi.Main.Version; v != "" {
		in.Version = v
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
			if len(in.Commit) > 12 {
				in.Commit = in.Commit[:12]
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && in.Commit != "" {
		in.Commit += "+dirty"
	}
	return in
}

// String is the one-line form --version prints after the program's name.
func (in Info) String() string {
	if in.Commit == "" {
		return fmt.Sprintf("%s (%s)", in.Version, in.Go)
	}
	return fmt.Sprintf("%s (commit %s, %s)", in.Version, in.Commit, in.Go)
}
