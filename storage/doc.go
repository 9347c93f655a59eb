// Package storage implements the engine's ports for the real world: OS
// files (fsync, directory sync, Direct I/O with a logged fallback where
// O_DIRECT is refused), S3 through aws-sdk-go-v2, the real clock, and the
// event-loop runtime that runs the engine on one goroutine while worker
// goroutines perform blocking calls and post completions back to it.
//
// Nothing here decides anything: every decision is the engine's. storage
// is imported by cmd/skipprd only, never by sim or faults.
package storage
