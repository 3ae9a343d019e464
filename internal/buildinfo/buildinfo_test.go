package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	in := Read()
	if in.Version == "" || in.Go != runtime.Version() {
		t.Fatalf("Read() = %+v", in)
	}
	if s := in.String(); !strings.Contains(s, in.Version) || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("String() = %q", s)
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Go: "go1.26.0"}, "v1.2.3 (go1.26.0)"},
		{Info{Version: "v1.2.3", Commit: "1db0181abcde", Go: "go1.26.0"}, "v1.2.3 (commit 1db0181abcde, go1.26.0)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
