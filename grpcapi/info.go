package grpcapi

import (
	"context"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/buildinfo"
)

// InfoServer implements slotd.v1.Info: the build of this replica. It reads
// nothing from etcd, so it answers while etcd is away too.
type InfoServer struct {
	slotdv1.UnimplementedInfoServer
	serverID string
}

var _ slotdv1.InfoServer = (*InfoServer)(nil)

// GetVersion returns this binary's build information.
func (s *InfoServer) GetVersion(context.Context, *slotdv1.GetVersionRequest) (*slotdv1.GetVersionResponse, error) {
	b := buildinfo.Read()
	return &slotdv1.GetVersionResponse{
		Version: b.Version, Commit: b.Commit, Go: b.Go,
		ServerId: s.serverID, DirectorySchema: directory.SchemaVersion,
	}, nil
}
