package flagenv

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestBind(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		wantDir string
		wantTO  time.Duration
		wantErr string
	}{
		{"defaults", nil, nil, "d", time.Second, ""},
		{"env sets", nil, map[string]string{"X_DATA_DIR": "/e", "X_TIMEOUT": "5s"}, "/e", 5 * time.Second, ""},
		{"flag wins", []string{"--data-dir", "/f"}, map[string]string{"X_DATA_DIR": "/e"}, "/f", time.Second, ""},
		{"bad env value", nil, map[string]string{"X_TIMEOUT": "soon"}, "d", time.Second, `X_TIMEOUT="soon"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			dir := fs.String("data-dir", "d", "data")
			to := fs.Duration("timeout", time.Second, "timeout")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := Bind(fs, "X_")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *dir != tc.wantDir || *to != tc.wantTO {
				t.Fatalf("got %q %v, want %q %v", *dir, *to, tc.wantDir, tc.wantTO)
			}
		})
	}
}

func TestAnnotate(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("data-dir", "", "where data lives")
	Annotate(fs, "SLOTD_")
	if u := fs.Lookup("data-dir").Usage; u != "where data lives (env SLOTD_DATA_DIR)" {
		t.Fatalf("usage %q", u)
	}
}
