// Package storage implements the engine's ports for the real world: OS
// files (fdatasync, directory sync, Direct I/O with a logged fallback where
// O_DIRECT is refused), S3 through aws-sdk-go-v2, the real clock, and the
// event-loop runtime that runs the engine on one goroutine while worker
// goroutines perform blocking calls and post completions back to it.
//
// Nothing here decides anything: every decision is the engine's. storage
// is imported by cmd/skipprd only, never by sim or faults.
//
// # The loop
//
// Loop (loop.go) is the one goroutine the engine runs on. Everything that
// completes a port request — a disk worker, an S3 worker, a timer, an
// executor job — ends with Loop.Post, and Post only queues: a callback is
// never run inside the call that requested it, and never concurrently with
// another. Stopping the loop (Stop, or cancelling Run's context) is the
// production form of a crash: no posted function runs afterwards, so
// completions of work still in flight are discarded. Call bridges other
// goroutines (cmd wiring, tests) into the loop and waits for an answer.
//
// Loop.Ports wires the small ports built on the loop (loop_ports.go):
// Clock (monotonic since the loop's creation), Rand (PCG seeded from
// crypto/rand), Timers (whose cancel is decided on the loop, so it wins
// even over a fire already queued) and Executor. Workers (blocking.go) is
// engine.Blocking: a fixed pool of goroutines for a transactional sink's
// calls, each bounded by a time limit and cancelled when the loop stops.
//
// # Host
//
// Host (host.go) is the production wiring of one engine on one loop, and
// the only way other goroutines — sources, cmd wiring, tests — should
// reach it: NewHost builds the engine and runs the loop goroutine, Start
// runs recovery and blocks until ingest opens, Ingest blocks until the
// unit is acked (nil) or refused (the engine's error), Offsets, Stats and
// Segments read the engine's state on the loop, Close commits and acks
// everything held before it stops the loop, and Kill is a crash: the loop
// stops at once and the store is closed, so no completion reaches that
// engine again while requests already sent may still land. A caller
// whose unit the engine took but did not answer — Kill, or its own
// context — gets ErrUnanswered: maybe committed, not acked, resubmit.
// AlertsSince drains the engine's bounded alert queue for the operator's
// log.
//
// # Object store
//
// S3Store (s3*.go) is engine.ObjectStore for one bucket: one goroutine per
// request, at most S3Options.Concurrency sending at once, each request
// bounded by S3Options.RequestTimeout and made as exactly one HTTP attempt
// (the engine owns retries). Errors map to the engine's sentinels in
// s3_errors.go; the mapping's reasons are written there. Request bodies
// are borrowed from the engine and revoked before done is posted
// (s3_body.go), and GET bodies are read through a limit, never trusting
// Content-Length alone. Requests are counted by operation and outcome
// (s3_stats.go: atomic counters, read by S3Store.Stats from any
// goroutine; cmd/skipprd exports them as metrics). NewS3ClientFromEnv builds a client from the
// standard AWS configuration, endpoint variables included; CheckBucket is
// the start-up check that keeps a missing bucket from reading as missing
// keys.
//
// # Disk
//
// OSDisk (disk*.go) is engine.Disk on files under a root directory. Each
// call runs on a worker goroutine; calls on one File run on that file's
// serial queue (serial.go), so they complete in call order. Sync is
// fdatasync, and a failed Sync poisons the handle. Direct asks for
// O_DIRECT through github.com/ncw/directio; where the filesystem refuses
// it the file is opened buffered, File.Direct reports false and the
// refusal is logged once. Alignment (engine.DirectAlign) of offsets and
// lengths is enforced whenever Direct was asked for, refused or not, so
// code that passes on a permissive filesystem passes on a strict one.
// Buffers should come from directio.AlignedBlock; a misaligned buffer
// address costs a copy through an aligned bounce buffer.
//
// # Memory and the embedded store
//
// SystemMemory (memory*.go) is engine.Memory: MemAvailable on Linux
// (lowered to a container's cgroup limit), total RAM on macOS, a fixed
// fallback elsewhere or when the reading fails. EmbeddedS3 (embedded.go)
// is gofakes3 on its bolt backend, served on loopback for the daemon's
// no-configuration mode; the daemon reaches it through the real SDK
// client, exactly like S3.
package storage
