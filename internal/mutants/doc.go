// Package mutants is the mutation self-test of the simulator's oracles
// (`make mutants`, cmd/mutants). A mutant is a one-line bug a tired
// engineer could really write into the engine — acking before the marker,
// reclaiming before the offsets checkpoint, trusting an ambiguous answer —
// each breaking one of the guarantees README.md lists ("Guarantees"). For
// every mutant the harness applies the bug to a scratch copy of the tree,
// builds simulate from it, and runs a bounded sweep that stops at the
// first failing seed. A sweep that fails kills the mutant; one that passes
// means the simulator cannot see that bug: a missing oracle, or a path
// the simulated world never reaches.
//
// # The data file
//
// mutants.txt, beside this file, holds the mutants: blocks of
// "field: value" lines separated by blank lines, "#" comments. Fields:
//
//	id:      a short unique name
//	file:    the file to mutate, from the repository root
//	rule:    one line: "§2.N <guarantee> — <why the slip is realistic>",
//	         naming the README guarantee the bug breaks
//	orig:    the exact original text; it must occur exactly once in file
//	repl:    the replacement
//	faults:  the simulate profile (optional; default swarm)
//	seeds:   how many seeds to sweep (optional; default Defaults.Seeds,
//	         at most SeedsMax)
//
// orig and repl are taken verbatim after "orig: " / "repl: ", unless the
// value starts with a double quote: then it is a Go string literal, so
// that tabs and newlines can give an ambiguous line its context. orig and
// repl must have the same number of lines and differ in exactly one: a
// mutant is a one-line bug. An orig that no longer occurs exactly once is
// STALE: the harness and a test in `make test` fail naming it, so a
// refactor cannot quietly switch a mutant off.
//
// # The scratch tree
//
// The working tree is never modified. The harness copies every file git
// knows of or would add (`git ls-files --cached --others
// --exclude-standard`, as they are on disk, uncommitted edits included)
// to a temporary directory, builds the unmutated simulate there once (the
// baseline), and then, per mutant, writes the mutated file, builds,
// restores the file, and runs the sweep. A seed that kills a mutant is
// replayed on the baseline: if the baseline fails it too, the kill proves
// nothing and the mutant is reported INVALID.
package mutants
