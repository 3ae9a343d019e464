package main

import (
	"strings"
	"testing"
)

func TestParseMetricsAndSum(t *testing.T) {
	const text = `# HELP etcd_mvcc_put_total Total number of puts seen by this member.
# TYPE etcd_mvcc_put_total counter
etcd_mvcc_put_total 42
etcd_mvcc_put_total_extra 7
grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV"} 10
grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Txn",grpc_service="etcdserverpb.KV"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV"} 5
go_memstats_heap_inuse_bytes 1.5e+06
labelled_with_space{what="a b"} 3 1700000000000
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		metric string
		labels []string
		want   float64
	}{
		{"plain counter, not its longer namesake", "etcd_mvcc_put_total", nil, 42},
		{"every series of a metric", "grpc_server_handled_total", nil, 17},
		{"one method", "grpc_server_handled_total", []string{rpc("Txn")}, 12},
		{"two labels", "grpc_server_handled_total", []string{rpc("Txn"), `grpc_code="OK"`}, 10},
		{"float notation", "go_memstats_heap_inuse_bytes", nil, 1.5e6},
		{"label value with a space, timestamp ignored", "labelled_with_space", nil, 3},
		{"absent", "etcd_mvcc_delete_total", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.sum(tc.metric, tc.labels...); got != tc.want {
				t.Errorf("sum(%s, %v) = %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}
}

func TestParseMetricsRefusesBadSamples(t *testing.T) {
	for _, line := range []string{"novalue", "name{a=\"b\"}", "name notanumber"} {
		if _, err := parseMetrics(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%q: parsed, want an error", line)
		}
	}
}
