package directory

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ValidatePrefix reports whether p can hold a cluster's keys: it starts and
// ends with "/", has at least one character between them, no empty
// segment ("//"), and only letters, digits and ".", "_", "-", "/". Several
// clusters may share one etcd under different prefixes; keep them disjoint
// (neither a prefix of the other), since a restore with --force clears
// everything under its prefix.
func ValidatePrefix(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: etcd prefix %q %s", ErrInvalid, p, why)
	}
	switch {
	case !strings.HasPrefix(p, "/"):
		return bad("must start with /")
	case !strings.HasSuffix(p, "/"):
		return bad("must end with /")
	case len(p) < 3:
		return bad("must name something between its slashes (e.g. /slotd/)")
	case strings.Contains(p, "//"):
		return bad("has an empty segment (//)")
	case len(p) > 128:
		return bad("is longer than 128 bytes")
	}
	for _, r := range p {
		ok := r == '/' || r == '.' || r == '_' || r == '-' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return bad(fmt.Sprintf("holds %q; use letters, digits, '.', '_', '-' and '/'", r))
		}
	}
	return nil
}

// Prefix returns the key prefix this directory works under.
func (d *Directory) Prefix() string { return d.cfg.Prefix }

// ClusterID returns the cluster's id, the one every map carries. The first
// call on a new directory stores proposed (when no other process got there
// first); after that the stored id wins, so every replica agrees on it and
// a restore that writes the saved id keeps clients' maps acceptable.
//
// Callers propose the etcd cluster id for the default prefix (what maps
// carried before the id was stored) and something that names the prefix
// as well for any other, so two clusters sharing an etcd differ.
func (d *Directory) ClusterID(ctx context.Context, proposed string) (string, error) {
	if proposed == "" {
		return "", fmt.Errorf("%w: empty cluster id", ErrInvalid)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	key := d.k.cluster()
	resp, err := d.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, proposed)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", fromEtcd(ctx, "cluster id", err)
	}
	if resp.Succeeded {
		return proposed, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || len(kvs[0].Value) == 0 {
		return "", fmt.Errorf("directory: cluster id key %s is empty", key)
	}
	return string(kvs[0].Value), nil
}
