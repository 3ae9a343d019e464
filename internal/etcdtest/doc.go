// Package etcdtest starts a real embedded etcd member for tests: free
// 127.0.0.1 ports, data in t.TempDir(), stopped when the test ends. Every
// package whose code talks to etcd tests against it instead of a mock of
// clientv3.
//
// Usage:
//
//	func TestSomething(t *testing.T) {
//		c := etcdtest.New(t)
//		cli := c.Client() // closed by the helper at the end of the test
//		if _, err := cli.Put(ctx, "k", "v"); err != nil {
//			t.Fatal(err)
//		}
//		c.Restart(t) // same data dir and ports; cli reconnects
//		c.Compact(t) // compact to the current revision, for watch tests
//		other := c.NewClient(t) // a second connection, as another process
//	}
//
// Tests skip fsync by default; benchmarks that claim production latencies
// pass etcdtest.WithFsync().
//
// The member logs nothing unless ETCDTEST_LOG is set in the environment
// (then errors go to stderr).
//
// The member and its clients leave no goroutines behind once the test's
// cleanups have run, so packages using it can keep
// goleak.VerifyTestMain(m) in their TestMain without ignore lists.
package etcdtest
