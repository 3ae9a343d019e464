package service

import (
	"context"
	"log/slog"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
)

// RecoveryServer serves slotdv1.Recovery: the fresh map stores confirm
// clean-ups against, declaring a node failed, and directory backups.
type RecoveryServer struct {
	slotdv1.UnimplementedRecoveryServer
	cfg Config
	dir *directory.Directory
	lg  *slog.Logger
}

var _ slotdv1.RecoveryServer = (*RecoveryServer)(nil)

// FreshMap implements slotdv1.RecoveryServer: the map read from etcd in
// one linearizable read, never the hub's copy, which may lag.
func (s *RecoveryServer) FreshMap(ctx context.Context, _ *slotdv1.FreshMapRequest) (*slotdv1.FreshMapResponse, error) {
	m, err := readMap(ctx, s.dir, s.cfg.ClusterID)
	if err != nil {
		return nil, toStatus(err)
	}
	return &slotdv1.FreshMapResponse{Map: m.Proto()}, nil
}
