package devca

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// DefaultTrustDomain is the trust domain in role URIs when Options leaves it empty.
const DefaultTrustDomain = "slotd"

// Options for Generate.
type Options struct {
	// Dir receives the files; created if missing. Required.
	Dir string
	// TrustDomain goes into the role URIs; default DefaultTrustDomain.
	TrustDomain string
	// Force regenerates everything even if a complete set is present.
	Force bool
	// Nodes are store node ids to issue node-bound store certificates
	// for (store-<id>.pem, see Set.NodeCert): role store and read, and
	// the node's URI, so a slotd with --require-node-identity accepts them
	// for that node only. Missing ones are added to an existing set.
	Nodes []string
}

// NodeCert returns the certificate and key files of store node id's
// node-bound certificate in the set's directory.
func (s Set) NodeCert(id string) (cert, key string) {
	dir := filepath.Dir(s.CA)
	return filepath.Join(dir, "store-"+id+".pem"), filepath.Join(dir, "store-"+id+"-key.pem")
}

// Set names the files of a development set. The base names are fixed (see the
// package comment); the fields hold them joined with Options.Dir.
type Set struct {
	CA, CAKey             string
	ServerCert, ServerKey string
	AdminCert, AdminKey   string
	ReadCert, ReadKey     string
	StoreCert, StoreKey   string
	TokenFile             string
	AdminToken, ReadToken string
	StoreToken            string
	// Reused is true when Generate found a complete set and left it alone.
	Reused bool
}

// SetIn returns the file names of the set in dir without touching the disk.
func SetIn(dir string) Set {
	p := func(name string) string { return filepath.Join(dir, name) }
	return Set{
		CA: p("ca.pem"), CAKey: p("ca-key.pem"),
		ServerCert: p("server.pem"), ServerKey: p("server-key.pem"),
		AdminCert: p("admin.pem"), AdminKey: p("admin-key.pem"),
		ReadCert: p("read.pem"), ReadKey: p("read-key.pem"),
		StoreCert: p("store.pem"), StoreKey: p("store-key.pem"),
		TokenFile:  p("tokens.txt"),
		AdminToken: p("admin.token"), ReadToken: p("read.token"), StoreToken: p("store.token"),
	}
}

// Files lists every path of the set, in a fixed order.
func (s Set) Files() []string {
	return []string{s.CA, s.CAKey, s.ServerCert, s.ServerKey, s.AdminCert, s.AdminKey,
		s.ReadCert, s.ReadKey, s.StoreCert, s.StoreKey, s.TokenFile,
		s.AdminToken, s.ReadToken, s.StoreToken}
}

// Generate writes a development CA, certificates and tokens into o.Dir.
// A complete existing set is kept (Set.Reused) unless o.Force; a partial one
// is an error, because mixing old and new files makes certificates that do
// not verify.
func Generate(o Options) (Set, error) {
	if o.Dir == "" {
		return Set{}, fmt.Errorf("%w: no output directory", ErrInvalid)
	}
	td := o.TrustDomain
	if td == "" {
		td = DefaultTrustDomain
	}
	set := SetIn(o.Dir)
	if !o.Force {
		var missing, present []string
		for _, f := range set.Files() {
			switch _, err := os.Stat(f); {
			case err == nil:
				present = append(present, filepath.Base(f))
			case errors.Is(err, fs.ErrNotExist):
				missing = append(missing, filepath.Base(f))
			default:
				return Set{}, fmt.Errorf("devca: %w", err)
			}
		}
		if len(missing) == 0 {
			set.Reused = true
			return set, nodeCerts(set, nil, td, o.Nodes)
		}
		if len(present) > 0 {
			return Set{}, fmt.Errorf("%w: %s holds a partial set (missing %s); regenerate with -force",
				ErrInvalid, o.Dir, strings.Join(missing, ", "))
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Set{}, fmt.Errorf("devca: %w", err)
	}

	ca, err := NewCA("slotd development CA")
	if err != nil {
		return Set{}, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return Set{}, err
	}
	if err := WriteFileAtomic(set.CA, ca.CertPEM, 0o644); err != nil {
		return Set{}, err
	}
	if err := WriteFileAtomic(set.CAKey, caKey, 0o600); err != nil {
		return Set{}, err
	}

	roles := func(rs ...string) []*url.URL {
		var us []*url.URL
		for _, r := range rs {
			us = append(us, RoleURI(td, r))
		}
		return us
	}
	leaves := []struct {
		leaf      Leaf
		cert, key string
	}{
		{Leaf{
			CommonName:  "slotd-server",
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			// Client usage too: etcd members dial each other with it and slotd
			// presents it to an etcd that checks client certificates.
			Server: true, Client: true,
		}, set.ServerCert, set.ServerKey},
		{Leaf{CommonName: "admin", URIs: roles("admin"), Client: true}, set.AdminCert, set.AdminKey},
		{Leaf{CommonName: "read", URIs: roles("read"), Client: true}, set.ReadCert, set.ReadKey},
		// A store node also watches the map, so it carries read as well.
		{Leaf{CommonName: "store", URIs: roles("store", "read"), Client: true}, set.StoreCert, set.StoreKey},
	}
	for _, l := range leaves {
		kp, err := ca.Issue(l.leaf)
		if err != nil {
			return Set{}, err
		}
		if err := kp.WriteFiles(l.cert, l.key); err != nil {
			return Set{}, err
		}
	}

	var tokens strings.Builder
	tokens.WriteString("# token role[,role] [name] -- development tokens, see internal/devca\n")
	for _, t := range []struct{ roles, name, file string }{
		{"admin", "admin-token", set.AdminToken},
		{"read", "read-token", set.ReadToken},
		{"store,read", "store-token", set.StoreToken},
	} {
		tok, err := NewToken()
		if err != nil {
			return Set{}, err
		}
		fmt.Fprintf(&tokens, "%s %s %s\n", tok, t.roles, t.name)
		if err := WriteFileAtomic(t.file, []byte(tok+"\n"), 0o600); err != nil {
			return Set{}, err
		}
	}
	if err := WriteFileAtomic(set.TokenFile, []byte(tokens.String()), 0o600); err != nil {
		return Set{}, err
	}
	return set, nodeCerts(set, ca, td, o.Nodes)
}

// nodeCerts issues the node-bound store certificates of ids that set's
// directory lacks, from ca (nil: the set's CA, read from its files).
func nodeCerts(set Set, ca *CA, td string, ids []string) error {
	for _, id := range ids {
		if id == "" || strings.ContainsAny(id, "/ ") {
			return fmt.Errorf("%w: node id %q", ErrInvalid, id)
		}
		cert, key := set.NodeCert(id)
		_, errC := os.Stat(cert)
		_, errK := os.Stat(key)
		if errC == nil && errK == nil {
			continue
		}
		if ca == nil {
			var err error
			if ca, err = LoadCA(set.CA, set.CAKey); err != nil {
				return err
			}
		}
		kp, err := ca.Issue(Leaf{CommonName: "store-" + id, URIs: []*url.URL{RoleURI(td, "store"), RoleURI(td, "read"), NodeURI(td, id)}, Client: true})
		if err != nil {
			return err
		}
		if err := kp.WriteFiles(cert, key); err != nil {
			return err
		}
	}
	return nil
}

// NewToken returns 32 random bytes, hex encoded: a bearer token.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("devca: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
