package embedetcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
)

func TestSlogCoreLevels(t *testing.T) {
	cancelled := fmt.Errorf("applyTxn: failed Range: %w", fmt.Errorf("rangeKeys: context cancelled: %w", context.Canceled))
	tests := []struct {
		name    string
		closing bool
		err     error
		want    string // the level slotd's log shows, "" for none
	}{
		{"a member error", false, errors.New("mvcc: database space exceeded"), "level=ERROR"},
		{"a read its caller cancelled", false, cancelled, "level=DEBUG"},
		{"a read past its caller's deadline", false, fmt.Errorf("rangeKeys: %w", context.DeadlineExceeded), "level=DEBUG"},
		{"any error while the member closes", true, errors.New("use of closed network connection"), "level=DEBUG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var closing atomic.Bool
			closing.Store(tt.closing)
			lg := newSlogLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &closing)
			lg.Error("unexpected error during readonly txn", zap.Error(tt.err))
			out := buf.String()
			if !strings.Contains(out, tt.want) || !strings.Contains(out, "etcd: unexpected error during readonly txn") {
				t.Errorf("log = %q, want a line at %s", out, tt.want)
			}
			if !strings.Contains(out, tt.err.Error()) {
				t.Errorf("log = %q, want the error %q in it", out, tt.err)
			}
		})
	}
}
