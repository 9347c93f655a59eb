// Command simulate runs the engine inside seeded simulated worlds and
// checks its guarantees. A failing run prints what broke, the seed and the
// exact command that reproduces it, shrinks its fault schedule, and exits
// 1. Beside the command it holds what the sim package must not import:
// the destinations over the real sinks (destinations.go, postgres.go,
// iceberg.go), the real sources' adapters (prefix.go for the objects
// source, codec.go for the Kafka, NATS and MQTT sources' logic,
// endpoint.go for the HTTP source), and the sweep's coverage rules
// (coverage.go, worldmarks.go).
//
//	simulate -seed 42 -iters 1e6
//	simulate -seeds 200 -iters 1e5 -faults swarm -coverage
//	simulate -replay seeds/seed-74.txt
//	simulate -seed 42 -timeline run.html
package main
