package embedetcd

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that hands etcd's log entries to slotd's
// slog logger, so that the member's messages look like slotd's own (one
// text line with fields, no JSON, no stack trace). Only errors pass, as
// before (etcd's info and warnings are chatty). While the member closes,
// its listeners report "use of closed network connection" and "server
// closed" as errors; those are the shutdown itself, logged at debug. So is
// a read whose caller gave up (etcd logs "unexpected error during readonly
// txn" with the caller's context.Canceled, as when slotd stops while a
// read is in flight): the caller has its error; the member is fine.
type slogCore struct {
	lg      *slog.Logger
	fields  []zapcore.Field
	closing *atomic.Bool
}

var _ zapcore.Core = (*slogCore)(nil)

func newSlogLogger(lg *slog.Logger, closing *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{lg: lg.With("component", "etcd"), closing: closing})
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.ErrorLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{lg: c.lg, fields: append(slices.Clip(c.fields), fields...), closing: c.closing}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelError
	if c.closing.Load() || callerCancelled(fields) {
		level = slog.LevelDebug
	}
	if !c.lg.Enabled(context.Background(), level) {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		if k != "errorVerbose" { // the error again, with a stack
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	attrs := make([]any, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	c.lg.Log(context.Background(), level, "etcd: "+e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// callerCancelled reports whether the entry's error is its caller's
// context ending (cancelled or past its deadline) and nothing else.
func callerCancelled(fields []zapcore.Field) bool {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType &&
			(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return true
		}
	}
	return false
}
