// Package flagenv lets every flag of a command be set by an environment
// variable: --data-dir of slotd is also SLOTD_DATA_DIR. A flag given on the
// command line wins over the environment.
//
// Usage, in a cobra command's PreRunE:
//
//	if err := flagenv.Bind(cmd.Flags(), "SLOTD_"); err != nil { return err }
package flagenv

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Name returns the variable that sets flag: prefix + the flag's name in upper
// case with dashes as underscores.
func Name(prefix, flag string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Bind sets every flag of fs not given on the command line from its
// variable, if set. A value the flag rejects is an error naming the variable.
func Bind(fs *pflag.FlagSet, prefix string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := Name(prefix, f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment %s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// Annotate appends "(env NAME)" to every flag's usage, so --help shows the
// variables.
func Annotate(fs *pflag.FlagSet, prefix string) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " (env " + Name(prefix, f.Name) + ")"
	})
}
