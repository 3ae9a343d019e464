// Package linz checks a workload history (package slotkv/workload) for
// linearizability with porcupine, modelling each key as a versioned
// register: Put sets the value and adds one to the version, CompareAndSet
// does so only when the version is the expected one, Get returns both.
// Keys are independent, so the history is checked one key at a time.
//
// A write with an unknown outcome is given an open end (it may take effect
// at any point after its call, or never observably); a write every attempt
// of which was refused, and every failed read, are left out: they changed
// nothing and observed nothing.
//
// Usage:
//
//	res := linz.Check(h, 30*time.Second)
//	if !res.OK() {
//		_ = res.Visualize(filepath.Join(t.TempDir(), "history.html"))
//	}
package linz
