package migrations

// What the tests of package migrations_test reach inside: the default
// steps (to build a directory at an older schema the way it was built)
// and schema 2's step, to run it twice.
var (
	DefaultSteps   = defaultSteps
	UpgradeResults = upgradeResults
)
