package workload

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotd/slotd/slotkv/kvclient"
	"github.com/slotd/slotd/slotkv/kvtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoadValue(t *testing.T) {
	for _, size := range []int{1, 31, 32, 33, 100, 1000} {
		a, b := LoadValue([]byte("key:7"), size), LoadValue([]byte("key:7"), size)
		if len(a) != size || !bytes.Equal(a, b) {
			t.Fatalf("size %d: got %d bytes, deterministic=%v", size, len(a), bytes.Equal(a, b))
		}
		if bytes.Equal(a, LoadValue([]byte("key:8"), size)) && size >= 8 {
			t.Fatalf("size %d: two keys share a value", size)
		}
	}
	if !bytes.HasPrefix(LoadValue([]byte("k"), 100), LoadValue([]byte("k"), 40)) {
		t.Fatal("a shorter value is not a prefix of a longer one: check would need the exact --size")
	}
}

// TestLoadCheckTraffic runs the three bulk mixes against real stores:
// Check finds what Load wrote, then a wrong size; Traffic loses no write.
func TestLoadCheckTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, kv := kvtest.New(t, 2).KV(t)
	bc := BulkConfig{KV: kv, Prefix: "b", Keys: 200, Size: 40, Concurrency: 4, OpTimeout: 10 * time.Second}

	if r, err := Load(ctx, bc); err != nil || r.Writes != 200 || r.Errors != 0 {
		t.Fatalf("Load = %+v, %v", r, err)
	}
	if r, err := Check(ctx, bc); err != nil || r.Reads != 200 || r.Errors != 0 || r.Bad != 0 {
		t.Fatalf("Check = %+v, %v", r, err)
	}
	wrong := bc
	wrong.Size = 41
	if r, err := Check(ctx, wrong); err != nil || r.Bad != 200 || len(r.Examples) != 5 {
		t.Fatalf("Check with the wrong size = %+v, %v; want 200 bad, 5 examples", r, err)
	}

	// Traffic stops when its context ends; the bound only ends the run.
	run, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	r, err := Traffic(run, TrafficConfig{BulkConfig: bc, Rate: 1000, WriteKeys: 8, Reads: 0.5})
	if err != nil || r.Errors != 0 || r.Bad != 0 || r.Reads+r.Writes == 0 {
		t.Fatalf("Traffic = %+v, %v", r, err)
	}
}

func TestBulkValidate(t *testing.T) {
	kv := &kvclient.Client{}
	for _, c := range []TrafficConfig{
		{BulkConfig: BulkConfig{Keys: 1, Size: 1, Concurrency: 1, OpTimeout: time.Second}, Rate: 1, WriteKeys: 1},
		{BulkConfig: BulkConfig{KV: kv, Keys: -1, Size: 1, Concurrency: 1, OpTimeout: time.Second}, Rate: 1, WriteKeys: 1},
		{BulkConfig: BulkConfig{KV: kv, Size: 1, Concurrency: 1}, Rate: 1, WriteKeys: 1},
		{BulkConfig: BulkConfig{KV: kv, Size: 1, Concurrency: 1, OpTimeout: time.Second}, WriteKeys: 1},
		{BulkConfig: BulkConfig{KV: kv, Size: 1, Concurrency: 1, OpTimeout: time.Second}, Rate: 1, WriteKeys: 1, Reads: 2},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: Validate = %v, want ErrInvalid", c, err)
		}
	}
}
