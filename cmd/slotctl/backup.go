package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newBackupCmd) }

// backupJSON is `slotctl backup FILE -o json`:
//
//	{"file": "dir.json", "version": 41, "etcd_revision": 1234, "bytes": 52311}
type backupJSON struct {
	File         string `json:"file"`
	Version      uint64 `json:"version"`
	EtcdRevision int64  `json:"etcd_revision"`
	Bytes        int    `json:"bytes"`
}

func newBackupCmd(g *globals) *cobra.Command {
	var history uint32
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Save the directory at one etcd revision (table, nodes, plans, policy, recent history) to FILE",
		Long: `Save the directory to FILE, consistent at one etcd revision: the slot table and
version, the nodes, moves in flight, plans and their records, the throttle and
policies, the cluster id, and the newest --history entries of history. Liveness
and leader keys belong to running processes and are left out.

Bring it back into a fresh etcd with 'slotd restore --from FILE' (slotd stopped).`,
		Example: `  slotctl backup dir.json
  slotd restore --from dir.json --data-dir /var/lib/slotd-new`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := slotdv1.NewRecoveryClient(c.cc).Backup(cctx, &slotdv1.BackupRequest{History: history})
				if err != nil {
					return err
				}
				if err := writeFileSync(file, resp.GetDocument()); err != nil {
					return err
				}
				out := backupJSON{File: file, Version: resp.GetVersion(), EtcdRevision: resp.GetEtcdRevision(), Bytes: len(resp.GetDocument())}
				return g.print(out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "saved the directory at version %d (etcd revision %d) to %s, %s\n",
						out.Version, out.EtcdRevision, out.File, formatBytes(uint64(out.Bytes)))
					return err
				})
			})
		},
	}
	cmd.Flags().Uint32Var(&history, "history", 1000, "newest history entries to keep")
	return cmd
}

// writeFileSync writes data to path through a temporary file, synced and
// renamed, so a crash never leaves half a backup under the name. The file
// is readable by its owner only: it names every node and address.
func writeFileSync(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
