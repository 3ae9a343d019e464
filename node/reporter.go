package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
)

// DefaultReportInterval is how often a Reporter sends the node's load.
const DefaultReportInterval = 10 * time.Second

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	// Node is the node whose load is sent (required).
	Node *Node
	// Replicas are every slotd replica, one client each (required): each
	// gets every report, so whichever leads the mover has the load.
	Replicas []slotdv1.LoadClient
	// Interval between reports (default DefaultReportInterval; slotd
	// takes a node as unknown after three intervals without a report).
	Interval time.Duration
	// Clock paces the reports (default: the node's clock).
	Clock Clock
	// Logger (default: the node's).
	Logger *slog.Logger
}

// Reporter sends its node's load to every slotd replica periodically. Safe
// for concurrent use.
type Reporter struct {
	cfg ReporterConfig
	lg  *slog.Logger

	mu     sync.Mutex    // guards failed
	failed map[int]error // replica index -> last error, to log changes only
}

// NewReporter checks cfg and returns a reporter; Run sends.
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	switch {
	case cfg.Node == nil:
		return nil, errors.New("node: ReporterConfig.Node is required")
	case len(cfg.Replicas) == 0:
		return nil, errors.New("node: ReporterConfig.Replicas is empty")
	case cfg.Interval < 0:
		return nil, errors.New("node: ReporterConfig.Interval must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultReportInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Node.cfg.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Node.lg
	}
	return &Reporter{cfg: cfg, lg: cfg.Logger, failed: map[int]error{}}, nil
}

// firstRetry is how soon a Reporter tries again before its first report
// went through (the node had no map yet, or no replica took it): a node's
// load is known as soon as it holds a map, not an interval later.
const firstRetry = 250 * time.Millisecond

// Run reports at once and then every interval until ctx is done. Until a
// report has reached a replica it tries again every firstRetry. A replica
// that does not answer is logged (once per change) and tried again at the
// next interval.
func (r *Reporter) Run(ctx context.Context) error {
	first := true
	for {
		gains, _ := r.cfg.Node.GainsMeasured()
		took, err := r.reportOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.lg.Debug("load report not sent", "err", err)
		}
		wait := r.cfg.Interval
		if first = first && took == 0; first {
			wait = min(firstRetry, r.cfg.Interval)
		}
		if !r.waitOrGain(ctx, wait, gains) {
			return nil
		}
	}
}

// gainCheck is how often a Reporter looks, between reports, for slots the
// node gained and has measured since its last report.
const gainCheck = time.Second

// waitOrGain waits d, or less when the node gains slots after the gains-th
// gain and has measured them: it reports them early. It returns false when
// ctx is done.
func (r *Reporter) waitOrGain(ctx context.Context, d time.Duration, gains uint64) bool {
	deadline := r.cfg.Clock.Now().Add(d)
	for {
		step := min(gainCheck, deadline.Sub(r.cfg.Clock.Now()))
		if step <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.cfg.Clock.After(step):
		}
		if g, measured := r.cfg.Node.GainsMeasured(); g != gains && measured {
			return true
		}
	}
}

// Report is the node's load as one LoadReport: the slots it owns with data
// or traffic (at most every slot) and its hot keys (at most
// HotKeyCapacity), so its size is bounded.
func (r *Reporter) Report(ctx context.Context) (*slotdv1.LoadReport, error) {
	l, err := r.cfg.Node.Load(ctx)
	if err != nil {
		return nil, err
	}
	rep := &slotdv1.LoadReport{
		NodeId: r.cfg.Node.ID(), Version: l.Version, Interval: durationpb.New(r.cfg.Interval),
		Slots: make([]*slotdv1.SlotLoad, len(l.Slots)),
	}
	for i, s := range l.Slots {
		rep.Slots[i] = &slotdv1.SlotLoad{
			Slot: uint32(s.Slot.Uint16()), Keys: uint64(max(s.Keys, 0)), Bytes: uint64(max(s.Bytes, 0)),
			Reads_1M: s.Reads1m, Writes_1M: s.Writes1m, Reads_10M: s.Reads10m, Writes_10M: s.Writes10m, Tag: s.Tag,
			MeasuredSeconds: s.MeasuredSeconds,
		}
	}
	for _, k := range l.HotKeys {
		rep.HotKeys = append(rep.HotKeys, &slotdv1.HotKey{Key: k.Key, Slot: uint32(k.Slot.Uint16()), Rate: k.Rate, Error: k.Error, Truncated: k.Truncated})
	}
	return rep, nil
}

// ReportOnce reads the node's load and sends it to every replica at once,
// each call bounded by the interval. It returns the replicas' errors
// joined (nil when every one took it).
func (r *Reporter) ReportOnce(ctx context.Context) error {
	_, err := r.reportOnce(ctx)
	return err
}

// reportOnce is ReportOnce, which also says how many replicas took it.
func (r *Reporter) reportOnce(ctx context.Context) (int, error) {
	rep, err := r.Report(ctx)
	if err != nil {
		return 0, fmt.Errorf("node: load report: %w", err)
	}
	errs := make([]error, len(r.cfg.Replicas))
	var wg sync.WaitGroup
	for i, c := range r.cfg.Replicas {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, r.cfg.Interval)
			defer cancel()
			_, errs[i] = c.Report(cctx, rep)
			r.note(i, errs[i])
		})
	}
	wg.Wait()
	took := 0
	for _, err := range errs {
		if err == nil {
			took++
		}
	}
	return took, errors.Join(errs...)
}

// note logs a replica's failure when it differs from its last one, and its
// recovery.
func (r *Reporter) note(i int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, had := r.failed[i]
	switch {
	case err == nil && had:
		delete(r.failed, i)
		if status.Code(last) == codes.Unavailable {
			r.lg.Debug("load report taken", "replica", i)
		} else {
			r.lg.Info("load report accepted again", "replica", i)
		}
	case err != nil && (!had || last.Error() != err.Error()):
		r.failed[i] = err
		if status.Code(err) == codes.Unavailable {
			// A replica away or behind the node's map: the registrar
			// already says when slotd is away, and the next report
			// usually goes through.
			r.lg.Debug("load report not taken yet", "replica", i, "err", err)
			return
		}
		r.lg.Warn("load report refused", "replica", i, "err", err)
	}
}
