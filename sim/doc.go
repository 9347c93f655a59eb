// Package sim is the simulated world the engine runs in under simulate:
// one goroutine, a priority queue of events in simulated time, a seeded
// PRNG per subsystem split from the root seed, a disk model that separates
// written from synced bytes, an object-store model with per-key atomicity,
// LIST lag, multipart state and ambiguous outcomes, simulated sources and
// sinks, the oracles that check the guarantees, and a trace hash updated
// at every event. Same seed ⇒ same trace ⇒ same hash.
//
// Production code never imports sim.
//
// # Determinism rules
//
// Everything in this package runs on the caller's goroutine, in simulated
// time. No goroutines, no wall clock, no global randomness, and no map
// iteration whose order can reach the outcome (iterate sorted keys).
// Every random choice draws from a Rand split by label from the root seed
// (Rand.Split), so adding a subsystem or a draw never perturbs another
// subsystem's stream. Floating point never decides event order.
//
// # Pieces
//
//   - Rand (rand.go): SplitMix64 streams; implements engine.Rand.
//   - Latency (latency.go): base + exponential-ish tail + per-MiB cost.
//   - Trace (trace.go): the running hash every model records into, with
//     an optional text dump (one line per event) for diffing two runs,
//     and an optional Tap (tap.go) that sees every event and the world's
//     notes (crashes, ACKs, applies, violations) without being hashed:
//     what simulate -timeline draws.
//   - Recorder and CheckDeterminism (trace_record.go, diverge.go): per-
//     record fingerprints of one run, compared as another runs, and text
//     captured for a small window only: where two runs of a seed part.
//   - Scheduler (sched.go): events ordered by (time, a tie drawn from the
//     seed, sequence number) — same-instant events run in a seeded order,
//     not FIFO; Step, Run, RunUntil; the Clock port (clock.go).
//   - Incarnation (incarnation.go): one engine process lifetime. Its
//     Timers and Executor ports, and every completion addressed to it, are
//     events it owns; Kill drops them all; Pause holds them (and every
//     store answer) until Resume — a zombie writer (zombie.go).
//   - Blocking (blocking.go): an incarnation's engine.Blocking port, a
//     pool of workers in simulated time. A call's work lands as a world
//     event after a seeded delay and its done follows on the loop; at a
//     crash, done never runs and a started call's work still lands (its
//     ctx ended) or never does, as the seed drew; a call that runs out of
//     the port's time limit answers the deadline, its work landed or not. Destinations get it
//     with the incarnation's ports (SinkPorts).
//   - Store (store*.go): one S3 bucket that outlives incarnations. Each
//     request's effect applies at its completion as a world event (so a
//     killed process's requests still land); the callback runs only if the
//     incarnation is alive. Fault outcomes, LIST lag and pagination are
//     documented in store.go, store_faults.go and store_list.go.
//   - Disk (disk*.go): a filesystem with a crash model — written vs
//     durable bytes per file, durable vs pending entries per directory,
//     fsync poisoning, torn writes, bit flips (disk.go, disk_crash.go).
//   - WorldSpec (spec.go): everything a seed draws about a world —
//     segment and part sizes, memory, limits, sources, sinks — so that a
//     seed file can record the world itself (DrawWorld, UnmarshalSpec).
//   - World (world.go, run.go): one seeded run — the engine (one current
//     incarnation, possibly zombies of earlier ones), the store, the disk,
//     the sources, the destinations, crashes, zombies, restarts and
//     corruption decided by a Faults plan (corrupt.go, zombie.go), a fault
//     phase, then a quiet phase in which the run must converge.
//   - Several pipelines (pipeline.go, pipeline_spec.go, hostdir.go):
//     WorldSpec.Pipelines adds daemons on the same machine, each a World
//     of its own (engine, zombies, sources, oracle, a data directory on
//     the world's disk, a WAL in the world's store or a store of its own)
//     sharing the scheduler, faults, disk and destinations with the first
//     pipeline's World, which runs the loop; a power loss kills every
//     process on the machine; the destination oracle keys jobs by the
//     committing log's origin, so every acked row of every pipeline is
//     checked.
//   - Sources (workload.go, source.go, unit.go, cdc.go): steady logs, CDC
//     streams and HTTP endpoints (with client timeouts that resend) and
//     bulk loads, drawn per world; replayable ones resume from the
//     recovered offsets (or older ones), one unit in flight per offset
//     key; non-replayable ones retry with the same idempotency key. A
//     unit's content is a pure function of its id. Broker sources
//     (broker.go, SourceSpec.FetchMax) are logs read as the Kafka source
//     reads one: a unit is a run of records (each record an id) cut anew
//     at every fetch, and a restart resumes once the units a disk WAL
//     replayed have committed (engine.ReplayPending). Behind some of
//     them the broker does more (SourceSpec.Broker, broker_log.go,
//     broker_fetch.go): retention removes records first read long
//     enough ago, partitions are added while the world runs, outages
//     fail every fetch; the source reports each range retention took
//     before it read it and stops or skips it, finds added partitions
//     and reads them from their start, and retries through outages.
//     Most broker sources run a real source's record logic
//     (SourceSpec.Codec, broker_codec.go, Config.Codec: sources/kafka
//     or sources/natsjs through cmd/simulate): its offset keys and
//     values, its resume against the log (gaps named, stopped on or
//     skipped as on_gap says), its JSON decoding and metadata columns,
//     its units halved to the limits; each row's metadata is checked
//     against its record and digested with it. Some sources that cannot
//     replay are MQTT publishers (mqtt_codec.go, Config.MQTT): the real
//     MQTT source's Unit keys each message by its id, and a message
//     unacked at a crash is delivered again with it.
//     Most CDC sources change a small key space (SourceSpec.Keys,
//     cdc.go): inserts, updates and deletes of the same identities from
//     every partition, under order tokens unique in the namespace that
//     units deliver out of order.
//   - HTTP clients (endpoint.go, endpoint_body.go, shape.go, refuse.go):
//     with Config.HTTP (cmd/simulate sets it) the non-replayable sources
//     are clients of the real HTTP source: each unit is a request with
//     its Idempotency-Key — an Arrow IPC stream, JSON lines or CSV with a
//     header (SourceSpec.Encoding), checked and decoded by sources/http —
//     and only a 200 it answers, stating the unit's rows, counts as an
//     ACK. Text bodies may carry an extra field and a field that widens
//     from int64 to float64 (shape.go), so a namespace has several schema
//     fingerprints; the values survive the source's type inference, and
//     what a unit produced has the columns the source decodes. Some units
//     go first as an invalid request under the same key — a malformed
//     line (400), an unknown Content-Type (415), a body over the world's
//     cap (413) — which must get exactly that status and change nothing.
//   - Prefix sources (prefix.go, prefix_objects.go, prefix_units.go):
//     with Config.Prefix an outside producer drops objects under
//     landing/ in the store — JSON lines, CSV and Parquet of several row
//     groups, many longer than the source's chunk, some unreadable — and
//     the real objects source, run as a coroutine over the world's store
//     and engine, ingests them. Each object is made of pieces the source
//     never splits (a record, a row group), each an oracle unit with the
//     offset value that covers it; every unit of the source must be a
//     contiguous run of one object's pieces from the first its offsets do
//     not cover, under the last one's offset, and the source must skip
//     and count the unreadable objects (on_error skip). In some worlds it
//     runs once, again and again, as skipprd run --once under a cron
//     (prefix_once.go): a run that returns must have done every object
//     its one listing showed.
//   - World marks (marks.go): the sources' rare paths (a CSV body, a
//     refused request, an object resumed mid-way), counted for the
//     coverage check (Result.WorldMarks).
//   - Oracles (oracle.go, recovery_oracle.go, bitmap_oracle.go,
//     sinkoracle.go, ackledger.go, digest.go, wal_oracle.go for the
//     local-disk WAL, reclaim_oracle.go for what a reclaim must leave
//     durable, broker_oracle.go for what a broker source may leave out:
//     only records retention removed, each in a gap it reported; the
//     sources' other checks live with them, above): the
//     guarantees, checked against the store's truth (the oracle decodes
//     every segment whose marker lands and compares whole rows with what
//     was produced, RowDigest), never against what the engine says of
//     itself; destinations (destination.go) report what they hold. A
//     destination whose tables are the result of its jobs (a database
//     applying CDC changes by identity) also checks them, after
//     convergence, against the acknowledged-change ledger: every unit
//     the engine acked or a recovery's offsets covered (tablecheck.go).
//     A destination with a model of its own may draw the world's sink
//     faults inside it (OwnFaults, World.SinkFault) and count its rare
//     paths as coverage marks (Marked, Result.DestMarks).
//
// # Wiring one engine incarnation
//
//	root := sim.NewRand(seed)
//	s := sim.NewScheduler(root.Split("sched"), sim.NewTrace(), sim.SchedulerConfig{})
//	store := sim.NewStore(s, root.Split("store"), sim.StoreConfig{})
//	disk := sim.NewDisk(s, root.Split("disk"), sim.DiskConfig{})
//	inc := s.NewIncarnation()
//	ports := engine.Ports{Clock: s.Clock(), Rand: root.Split("engine/1"),
//		Timers: inc.Timers(), Exec: inc.Executor(),
//		Store: store.Client(inc), Disk: disk.Client(inc)}
//
// A crash is inc.Kill() followed by disk.Crash(r) (a power loss), then a
// new incarnation with fresh ports; a crash that spares the machine is
// inc.Kill() alone: the disk keeps everything written, durable or not
// (WorldSpec.KillOnly, and the fsync-error-kill fault). Drive the world with s.Step() and read s.Trace().Hash()
// at the end.
package sim
