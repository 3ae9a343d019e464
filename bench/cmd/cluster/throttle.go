package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/slotd/slotd/slots"
)

// itemThrottle moves slot s (the 1 KiB dataset) at 5 MB/s once and at
// 20 MB/s back and forth, sampling slotd's moved-bytes counter each second.
func itemThrottle(ctx context.Context, oc *ourCluster, s slots.Slot) ([]row, error) {
	var rows []row
	for _, tc := range []struct {
		rate  uint64
		moves int
	}{{5_000_000, 2}, {20_000_000, 6}} {
		logf("item 5: throttle %d MB/s (load %s)", tc.rate/1e6, loadavg())
		if err := oc.throttle(ctx, tc.rate); err != nil {
			return nil, err
		}
		type sample struct {
			at    time.Time
			bytes float64
		}
		var mu sync.Mutex
		var samples []sample
		sctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				if m, err := oc.metrics(); err == nil {
					mu.Lock()
					samples = append(samples, sample{time.Now(), m["slotd_mover_bytes_moved_total"]})
					mu.Unlock()
				}
				select {
				case <-sctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
		var err error
		for range tc.moves {
			to := "n1"
			if oc.sdk.Map().OwnerID(s) == "n1" {
				to = "n2"
			}
			if _, err = oc.move(ctx, s, to); err != nil {
				break
			}
		}
		stop()
		wg.Wait()
		if err != nil {
			return nil, err
		}
		var rates []float64
		for i := 1; i < len(samples); i++ {
			db := samples[i].bytes - samples[i-1].bytes
			if db <= 0 {
				continue
			}
			rates = append(rates, db/samples[i].at.Sub(samples[i-1].at).Seconds())
		}
		// The first and last windows with bytes hold a partial second.
		if len(rates) > 2 {
			rates = rates[1 : len(rates)-1]
		}
		mn, mx := 0.0, 0.0
		for i, r := range rates {
			if i == 0 || r < mn {
				mn = r
			}
			mx = max(mx, r)
		}
		med := medianF(rates)
		rows = append(rows, row{fmt.Sprintf("throttle %d MB/s: achieved per 1-s window, min / median / max (%d windows)", tc.rate/1e6, len(rates)),
			fmt.Sprintf("%.2f / %.2f / %.2f MB/s", mn/1e6, med/1e6, mx/1e6), fmt.Sprintf("setting %d MB/s", tc.rate/1e6),
			ratio(float64(tc.rate), med), fmt.Sprintf("`slotctl throttle %dMB`, then `slotctl move SLOT --to ID` x%d; `cd bench && go run ./cmd/cluster -items 2,5`", tc.rate/1e6, tc.moves)})
	}
	return rows, oc.throttle(ctx, 0)
}
