// Command mutants is the mutation self-test of the simulator's oracles
// (make mutants): it applies each one-line bug of
// internal/mutants/mutants.txt to a scratch copy of the tree, runs a
// bounded simulate sweep that stops at the first failing seed, and
// reports which bugs the sweep killed and which survived. It exits 1 if
// any mutant survived (or its kill was invalid), 2 if the harness could
// not run (a STALE mutant, a baseline that does not build).
//
//	mutants                          # every mutant
//	mutants -only ack-after-body     # some, comma-separated
//	mutants -seeds 100               # every mutant gets 100 seeds
package main
