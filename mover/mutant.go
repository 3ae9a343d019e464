//go:build mutant_ignorepause

package mover

// ignorePause makes this a mutant executor that treats a paused plan as
// applying, for checking that the scripted tests catch it:
// go test -tags mutant_ignorepause -run TestScripts ./mover must fail.
const ignorePause = true
