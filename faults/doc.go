// Package faults decides which faults a simulated run injects.
//
//   - kinds.go: the fault kinds, their names, and what a world must offer
//     for each to be able to fire (Needs; Plan.Restrict drops the others,
//     so a plan never prints a fault that cannot happen).
//   - plan.go: a Plan — rates per kind and the parameters some kinds need
//     (LIST lag, spike and pause bounds, outage windows) — drawn per seed
//     (Swarm: each kind enabled about half the time at a log-uniform rate;
//     a disk-WAL world always gets crash points and commit-power-loss,
//     set by Restrict)
//     or named (none, swarm, crash, flaky, all, and the aimed multipart,
//     rot and fsync: ProfileNames); plans round-trip through JSON
//     with rates by kind name, so adding a kind never changes an old file.
//   - injector.go, store.go: the Injector, which answers the world at each
//     decision point. Recording, it draws from a stream of its own (never
//     the world's) and records every decision that fired; replaying, it
//     fires exactly a Schedule's decisions and draws nothing.
//   - schedule.go: a Schedule — "kind@n[=param]" per fired decision, n the
//     decision point's number within its kind — its text form and parser.
//
// It has no package-level state: a plan is a value derived from a seed, a
// schedule a value recorded from a run. Production code never imports
// faults.
package faults
