package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// History returns up to limit of the newest changes, oldest first. A limit
// <= 0 means all that are kept.
func (d *Directory) History(ctx context.Context, limit int) ([]Change, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	out, err := d.readHistory(ctx, d.k.historyPrefix(), opts)
	slices.Reverse(out)
	return out, err
}

// HistorySince returns the kept changes with a version greater than after,
// oldest first, at most limit of them (limit <= 0: no bound). Entries older
// than the history bound are gone; compare the first Version with after+1
// to see whether some were.
func (d *Directory) HistorySince(ctx context.Context, after uint64, limit int) ([]Change, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(d.k.historyPrefix()))}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	return d.readHistory(ctx, d.k.history(after+1), opts)
}

func (d *Directory) readHistory(ctx context.Context, key string, opts []clientv3.OpOption) ([]Change, error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.cli.Get(rctx, key, opts...)
	if err != nil {
		return nil, fromEtcd(ctx, "read history", err)
	}
	out := make([]Change, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		var r changeRec
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("directory: history entry %s: %w", kv.Key, err)
		}
		c, err := r.change()
		if err != nil {
			return nil, fmt.Errorf("directory: %w", err)
		}
		out[i] = c
	}
	return out, nil
}
