package console_test

import (
	"io"
	"net/http"
	"testing"
)

// BenchmarkConsolePoll is what one open page costs slotd per poll, over a
// real slotd's HTTP port with 3 stores: the status (an etcd read of the
// table, nodes, history), the map encoded for a new version (cached after),
// and an unchanged map answered 304 from its ETag.
//
//	go test -run '^$' -bench ConsolePoll -benchtime 200x ./console
func BenchmarkConsolePoll(b *testing.B) {
	c := startCluster(b, 3)
	base := "http://" + c.slotd.HTTPAddr()
	hc := &http.Client{}
	fetch := func(b *testing.B, url, etag string) (string, int) {
		req, _ := http.NewRequest("GET", url, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("ETag"), int(n)
	}
	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			fetch(b, base+"/api/v1/status", "")
		}
	})
	b.Run("map", func(b *testing.B) {
		var n int
		for b.Loop() {
			_, n = fetch(b, base+"/api/v1/map", "")
		}
		b.SetBytes(int64(n))
	})
	b.Run("map-unchanged", func(b *testing.B) {
		etag, _ := fetch(b, base+"/api/v1/map", "")
		for b.Loop() {
			fetch(b, base+"/api/v1/map", etag)
		}
	})
}
