package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// The config file holds named contexts: where a cluster is and how to
// authenticate to it, so an operator of several clusters types
// `slotctl --context prod status` rather than five flags. It is JSON:
//
//	{"current_context": "prod",
//	 "contexts": {"prod": {"endpoints": "https://10.0.0.1:7400,https://10.0.0.2:7400",
//	                       "tls_ca": "/etc/slotd/ca.pem", "tls_cert": "/home/me/admin.pem",
//	                       "tls_key": "/home/me/admin-key.pem", "token_file": ""}}}
//
// It lives at $SLOTCTL_CONFIG, default $XDG_CONFIG_HOME/slotctl/config.json
// (~/.config/slotctl/config.json), and is written with mode 0600 (it names
// key and token files, and a directory of 0700): slotctl refuses to use a
// file that others may write.
//
// Precedence, for each setting: a flag given on the command line, then its
// environment variable (SLOTCTL_ENDPOINTS, SLOTCTL_TLS_CA, SLOTCTL_TLS_CERT,
// SLOTCTL_TLS_KEY, SLOTCTL_TOKEN_FILE), then the context (--context, else
// SLOTCTL_CONTEXT, else current_context), then the built-in default.

// slotctlConfig is the config file.
type slotctlConfig struct {
	CurrentContext string                    `json:"current_context,omitempty"`
	Contexts       map[string]*contextConfig `json:"contexts"`
}

// contextConfig is one context: the connection settings of a cluster.
type contextConfig struct {
	Endpoints string `json:"endpoints,omitempty"`
	TLSCA     string `json:"tls_ca,omitempty"`
	TLSCert   string `json:"tls_cert,omitempty"`
	TLSKey    string `json:"tls_key,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
}

// contextSetting ties a context field to its global flag and variable.
type contextSetting struct {
	flag, env string
	field     func(*contextConfig) *string
	global    func(*globals) *string
	file      bool // a path: stored absolute
}

var contextSettings = []contextSetting{
	{"endpoints", "SLOTCTL_ENDPOINTS", func(c *contextConfig) *string { return &c.Endpoints }, func(g *globals) *string { return &g.endpoints }, false},
	{"tls-ca", "SLOTCTL_TLS_CA", func(c *contextConfig) *string { return &c.TLSCA }, func(g *globals) *string { return &g.tlsCA }, true},
	{"tls-cert", "SLOTCTL_TLS_CERT", func(c *contextConfig) *string { return &c.TLSCert }, func(g *globals) *string { return &g.tlsCert }, true},
	{"tls-key", "SLOTCTL_TLS_KEY", func(c *contextConfig) *string { return &c.TLSKey }, func(g *globals) *string { return &g.tlsKey }, true},
	{"token-file", "SLOTCTL_TOKEN_FILE", func(c *contextConfig) *string { return &c.TokenFile }, func(g *globals) *string { return &g.tokenFile }, true},
}

// envDefault is a flag's default: its environment variable, else def.
func envDefault(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// configPath is where the config file is.
func configPath() (string, error) {
	if p := os.Getenv("SLOTCTL_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory (set SLOTCTL_CONFIG to a file path): %w", err)
	}
	return filepath.Join(dir, "slotctl", "config.json"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig() (*slotctlConfig, string, error) {
	path, err := configPath()
	if err != nil {
		return nil, "", err
	}
	cfg := &slotctlConfig{Contexts: map[string]*contextConfig{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return nil, path, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o022 != 0 {
		return nil, path, fmt.Errorf("config file %s is writable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	if err := json.NewDecoder(f).Decode(cfg); err != nil {
		return nil, path, fmt.Errorf("config file %s: %w", path, err)
	}
	if cfg.Contexts == nil {
		cfg.Contexts = map[string]*contextConfig{}
	}
	return cfg, path, nil
}

// save writes the config file atomically with mode 0600.
func (c *slotctlConfig) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: already gone
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// names returns the context names, sorted.
func (c *slotctlConfig) names() []string {
	out := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// applyContext fills the connection settings that neither a flag nor an
// environment variable gave from the selected context. It runs before
// every command but `slotctl config ...`.
func (g *globals) applyContext(cmd *cobra.Command) error {
	name, explicit := g.context, g.context != ""
	if !explicit {
		name = os.Getenv("SLOTCTL_CONTEXT")
		explicit = name != ""
	}
	cfg, path, err := loadConfig()
	if err != nil {
		if !explicit {
			// The built-in defaults still work; say why the file was skipped.
			fmt.Fprintf(g.stderr, "slotctl: ignoring the config file: %v\n", err)
			return nil
		}
		return err
	}
	if !explicit {
		name = cfg.CurrentContext
	}
	if name == "" {
		return nil
	}
	cc, ok := cfg.Contexts[name]
	if !ok {
		return usagef("no context %q in %s (slotctl config get-contexts lists them)", name, path)
	}
	g.contextName = name
	flags := cmd.Flags()
	for _, s := range contextSettings {
		if f := flags.Lookup(s.flag); f != nil && f.Changed || os.Getenv(s.env) != "" {
			continue
		}
		if v := *s.field(cc); v != "" {
			*s.global(g) = v
		}
	}
	return nil
}

// isConfigCommand reports whether cmd is `slotctl config ...`, which reads
// and writes the file itself and must work while it names a bad context.
func isConfigCommand(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "config" && c.Parent() != nil && !c.Parent().HasParent() {
			return true
		}
	}
	return false
}

// splitEndpoint strips an http:// or https:// scheme (and a trailing /)
// from an endpoint: gRPC is HTTP/2, and people copy URLs. It returns the
// host:port and whether TLS was asked for (https), or a usage error for
// another scheme or a path.
func splitEndpoint(e string) (hostport string, scheme string, err error) {
	rest, ok := "", false
	for _, s := range []string{"http", "https"} {
		if rest, ok = strings.CutPrefix(e, s+"://"); ok {
			scheme = s
			break
		}
	}
	if !ok {
		if strings.Contains(e, "://") {
			return "", "", usagef("endpoint %q: only http:// and https:// URLs or host:port", e)
		}
		return e, "", nil
	}
	rest = strings.TrimSuffix(rest, "/")
	if strings.Contains(rest, "/") {
		return "", "", usagef("endpoint %q: slotd's gRPC endpoint has no path; give https://host:port", e)
	}
	return rest, scheme, nil
}
