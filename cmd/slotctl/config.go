package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"
)

func init() { register(newConfigCmd) }

// contextJSON is one element of `slotctl config get-contexts -o json`:
//
//	[{"name": "prod", "current": true, "endpoints": "https://10.0.0.1:7400",
//	  "tls_ca": "/etc/slotd/ca.pem", "tls_cert": "", "tls_key": "", "token_file": "/home/me/token"}]
type contextJSON struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	contextConfig
}

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Named contexts (endpoints, TLS files, token) in slotctl's config file",
		Long: `config edits slotctl's config file ($SLOTCTL_CONFIG, default
~/.config/slotctl/config.json, mode 0600): named contexts, each with endpoints,
TLS files and a token file, and the current one. Every other command takes its
connection settings from the context (--context NAME, else SLOTCTL_CONTEXT,
else the current context) unless a flag or an environment variable gives them.`,
		Example: `  slotctl config set-context prod --endpoints https://10.0.0.1:7400 --tls-ca ca.pem --token-file admin.token
  slotctl config use-context prod
  slotctl --context dev status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: slotctl config set-context|use-context|get-contexts|current-context|delete-context")
		},
	}
	cmd.AddCommand(newSetContextCmd(g), newUseContextCmd(g), newGetContextsCmd(g), newCurrentContextCmd(g), newDeleteContextCmd(g))
	return cmd
}

// withConfig loads the config file, runs fn on it and saves it when fn
// says it changed it.
func withConfig(fn func(cfg *slotctlConfig) (changed bool, err error)) error {
	cfg, path, err := loadConfig()
	if err != nil {
		return err
	}
	changed, err := fn(cfg)
	if err != nil || !changed {
		return err
	}
	return cfg.save(path)
}

func newSetContextCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set-context NAME [--endpoints E] [--tls-ca F] [--tls-cert F --tls-key F] [--token-file F]",
		Short: "Create a context, or change the settings given on the command line",
		Long: `set-context stores the connection flags given with it under NAME; a context
that exists keeps the settings not given. File paths are stored absolute. The
first context made becomes the current one.`,
		Example: `  slotctl config set-context prod --endpoints https://10.0.0.1:7400,https://10.0.0.2:7400 --tls-ca /etc/slotd/ca.pem --token-file ~/admin.token
  slotctl config set-context dev --endpoints 127.0.0.1:7400`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("a context needs a name")
			}
			return withConfig(func(cfg *slotctlConfig) (bool, error) {
				cc := cfg.Contexts[name]
				verb := "changed"
				if cc == nil {
					cc, verb = &contextConfig{}, "created"
					cfg.Contexts[name] = cc
				}
				for _, s := range contextSettings {
					if !cmd.Flags().Changed(s.flag) {
						continue
					}
					v := *s.global(g)
					if s.file && v != "" {
						abs, err := filepath.Abs(v)
						if err != nil {
							return false, err
						}
						v = abs
					}
					if s.flag == "endpoints" {
						if _, _, err := g.parseEndpoints(v); err != nil {
							return false, err
						}
					}
					*s.field(cc) = v
				}
				if cfg.CurrentContext == "" {
					cfg.CurrentContext = name
				}
				fmt.Fprintf(g.stdout, "context %s %s\n", name, verb)
				return true, nil
			})
		},
	}
}

func newUseContextCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make NAME the current context",
		Example:           "  slotctl config use-context prod",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfig(func(cfg *slotctlConfig) (bool, error) {
				if cfg.Contexts[args[0]] == nil {
					return false, fmt.Errorf("no context %q (slotctl config get-contexts lists them)", args[0])
				}
				cfg.CurrentContext = args[0]
				fmt.Fprintf(g.stdout, "switched to context %s\n", args[0])
				return true, nil
			})
		},
	}
}

func newGetContextsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "get-contexts",
		Short:   "List the contexts; * marks the current one",
		Example: "  slotctl config get-contexts -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig()
			if err != nil {
				return err
			}
			out := []contextJSON{}
			for _, n := range cfg.names() {
				out = append(out, contextJSON{Name: n, Current: n == cfg.CurrentContext, contextConfig: *cfg.Contexts[n]})
			}
			return g.print(out, func(w io.Writer) error {
				t := newTable(w, "CURRENT", "NAME", "ENDPOINTS", "TLS CA", "CERTIFICATE", "TOKEN FILE")
				for _, c := range out {
					cur := ""
					if c.Current {
						cur = "*"
					}
					t.row(cur, c.Name, orDash(c.Endpoints), orDash(c.TLSCA), orDash(c.TLSCert), orDash(c.TokenFile))
				}
				return t.flush()
			})
		},
	}
}

func newCurrentContextCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "current-context",
		Short:   "Print the current context's name",
		Example: "  slotctl config current-context",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig()
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return errors.New("no current context (slotctl config use-context NAME)")
			}
			return g.print(map[string]string{"current_context": cfg.CurrentContext}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, cfg.CurrentContext)
				return err
			})
		},
	}
}

func newDeleteContextCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "delete-context NAME",
		Short:             "Remove a context (and unset it if it was the current one)",
		Example:           "  slotctl config delete-context old",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfig(func(cfg *slotctlConfig) (bool, error) {
				if cfg.Contexts[args[0]] == nil {
					return false, fmt.Errorf("no context %q (slotctl config get-contexts lists them)", args[0])
				}
				delete(cfg.Contexts, args[0])
				if cfg.CurrentContext == args[0] {
					cfg.CurrentContext = ""
				}
				fmt.Fprintf(g.stdout, "context %s deleted\n", args[0])
				return true, nil
			})
		},
	}
}
