//go:build !mutant_ignorepause

package mover

// ignorePause is false but in the mutant build (see mutant.go).
const ignorePause = false
