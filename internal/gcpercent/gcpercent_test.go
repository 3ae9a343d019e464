package gcpercent

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tests := []struct {
		name, env, want string
		percent         int
	}{
		{"unset: the default", "", "400", Default},
		{"operator's GOGC wins", "150", "150", 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			t.Setenv("GOGC", tc.env) // restored after the test
			if tc.env == "" {
				os.Unsetenv("GOGC")
			}
			if got := Apply(); got != tc.want {
				t.Errorf("Apply() = %q, want %q", got, tc.want)
			}
			if got := debug.SetGCPercent(100); got != tc.percent {
				t.Errorf("GC percent = %d, want %d", got, tc.percent)
			}
		})
	}
}
