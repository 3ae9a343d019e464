// Package harness runs slotd's real binaries for end-to-end tests: it builds
// them once per test binary, starts processes on free 127.0.0.1 ports with
// their own data dirs, captures their output (printed into the test log when
// the test fails) and kills everything the test started when it ends.
//
// Usage:
//
//	func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
//
//	func TestX(t *testing.T) {
//		h := harness.New(t)
//		p := h.Start("slotd", "slotd", "--data-dir", h.Dir("slotd"), "--listen", h.Addr("slotd"))
//		p.Kill() // SIGKILL; p.Restart() starts it again with the same arguments
//	}
package harness
