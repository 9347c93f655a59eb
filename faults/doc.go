// Package faults decides which faults a simulated run injects: a fault
// plan per seed (swarm style: each seed enables a random subset of fault
// kinds at random rates), crash points, and the injectors sim consults at
// each operation's completion. It has no package-level state: a plan is a
// value derived from a seed.
//
// Production code never imports faults.
package faults
