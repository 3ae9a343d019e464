// Package migrations upgrades the directory's etcd schema: an ordered list
// of idempotent steps, each turning schema N-1 into N, applied under an etcd
// lock so that several slotd processes starting together apply each step
// once. A binary refuses to run against a schema newer than its newest step.
//
// The steps act only through directory primitives (directory.InitLayout,
// directory.ReindexNodes, ...): the directory stays the only code that knows
// the etcd keys.
//
// The steps: 1 creates the layout; 2 moves plan results into the
// directory, reading schema 1's plan records (results.go); 3 stores the
// replication policy at rf 1, min_isr 1, and nothing else, so every slot
// keeps its owner as its only replica (docs/replication.md, "Directory
// (schema 3)").
//
// Usage, at process start before anything else uses the directory:
//
//	d, err := directory.New(directory.Config{Client: cli})
//	if err != nil { ... }
//	applied, err := migrations.Apply(ctx, d)
//	if errors.Is(err, migrations.ErrSchemaTooNew) {
//		// refuse to start: the message names the schema found and the
//		// newest this binary supports
//	}
//
// Adding a schema version: bump directory.SchemaVersion, add the directory
// primitive the step needs, and append a Migration with the next Version to
// defaultSteps.
package migrations
