package main

import (
	"fmt"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// optionalMarks are the rare branches an ordinary sweep need not reach,
// each with why the simulated world does not, and the test that does.
// Every other mark is required: a sweep whose worlds never reach it is
// not testing that path (TestCoverage).
var optionalMarks = map[engine.Mark]string{
	engine.MarkBackpressureQueue: "a world with a live-bytes bound whose writer queue is full when live reaches it " +
		"(5 worlds of 60 in a sweep), too few for TestSweep's seeds to be sure of one; engine TestRefusals reaches it",
	engine.MarkBackpressureOffset: "the simulated sources keep the offset contract (one unit in flight per key; a resend " +
		"carries the same offsets and joins); engine TestRefusals reaches it",
	engine.MarkBodyUncached: "a memory-hint shrink landing while a body is being fetched into the cache; " +
		"a race a sweep meets only now and then",
	engine.MarkMarkerBodyUnlisted: "recovery waits out the LIST lag (FenceWait) before it lists, so a counting marker's " +
		"body is listed too; engine TestRecoveryLaggingBody reaches it",
	engine.MarkCheckpointOldFormat: "a log written before idempotency keys moved to runs; " +
		"engine TestOldFormatCheckpointIsHonoured reaches it",
	engine.MarkBackpressureView: "the view holds source offsets only, and a world's sources have a fixed set of " +
		"partition keys well under the limit (filling it would stall them for good); engine TestOffsetsViewIsBounded reaches it",
	engine.MarkBackpressureKeys: "needs the key store to fill a quarter of the memory pool: millions of keys, " +
		"beyond a world's hours; engine TestKeyMemoryIsBounded reaches it",
	engine.MarkIdemManifestLost: "a manifest deleted under a writer that listed runs in it: only another incarnation " +
		"expiring the bucket early (a clock far ahead) does that; engine TestLostManifestIsWrittenAgain reaches it",
	engine.MarkIdemBlockGone: "a lookup racing a merge that deletes the run it reads: some worlds of a few hundred; " +
		"engine TestLookupFollowsAMergedRun reaches it",
	engine.MarkIdemWriteWaitsRead: "a lookup's block gone (a merge racing it) while a checkpoint round has the bucket queued " +
		"behind more dirty buckets than RecoveryConcurrency: needs keys of two buckets dirty in one round, which a world's " +
		"rounds rarely leave; engine TestRoundWriteWaitsForALookupsRead reaches it",
	engine.MarkIdemManifestFull: "256 runs in one bucket: merges keep a bucket to a few dozen unless every merge " +
		"fails; engine TestFullManifestWaitsForAMerge reaches it",
	engine.MarkClaimLanded: "an epoch claim answered ambiguously that landed: about one world in twenty reaches it " +
		"(13 of 300 in a sweep), too few for the 24 seeds of TestSweep; engine TestClaimLandedDespiteLostAnswer reaches it",
	engine.MarkWALBacklog: "a durable unit finds no room in live only past a snapshot limit with the writer's queue " +
		"full: disk worlds with a live-bytes bound reach it (4 of 60 in a sweep), too few for TestSweep's seeds to be " +
		"sure of one; engine TestDiskBacklogKeepsAckedUnits reaches it",
	engine.MarkWALHaltedKeep: "a world's run ends at the alert of a halted WAL partition; " +
		"engine TestDiskHaltedPartitionKeepsItsSegments reaches it",
	engine.MarkBitmapUnreadable: "a completion bitmap damaged at rest and then read by a recovery before its segment " +
		"was reclaimed: 2 worlds of 100 in a sweep; engine TestUnreadableBitmapKeepsSegment reaches it",
	engine.MarkLostBitsInferred: "a bitmap damaged at rest in a segment holding PARTs of an applied spanning job " +
		"whose cut was reclaimed, read by a recovery while the lane's next cut is live; engine " +
		"TestLostBitmapBeforeALiveCut reaches it (seed 26 found it; its replay no longer reaches it)",
	engine.MarkWALFlushedPartly: "a power loss between the fsyncs of one generation's flushed records in two log " +
		"partitions: 36 worlds of 500 in a sweep, too few for TestSweep's short one; engine " +
		"TestDiskFlushedInOnePartitionOnly reaches it",
	engine.MarkIdemRunLost: "a manifest read just before a merge deleted a run it lists: 1 to 3 worlds of 40 in a sweep, " +
		"too few for TestSweep's fixed seeds to be sure of one; engine TestMissingRunIsDropped reaches it",
	engine.MarkLegacyOrigin: "a segment committed by a build before WAL identities (a version 1 marker): worlds start " +
		"empty and every marker they write has an origin; engine TestUpgradeKeepsLegacyIDsAcrossACrash and " +
		"TestLegacyIDCollisionIsAlerted reach it, and cmd/skipprd TestUpgradeAcrossCrash upgrades a real daemon",
	engine.MarkMarkerExists: "a marker key is taken only if two writers share an epoch, which claims prevent (an unheard " +
		"marker PUT is read, never PUT again); engine TestForeignMarkerFailsClosed reaches it",
}

// destMarks are the marks a destination counts on its own (sim.Marked),
// by the destination kind whose worlds can reach them. A mark is
// required of a sweep that ran a world of its kind, unless it is in
// optionalDestMarks.
var destMarks = []destMark{
	{"postgres", markPGAmbiguousLanded}, // a commit answered ambiguously, found landed by the lookup
	{"postgres", markPGAmbiguousLost},   // a transaction answered ambiguously, found absent
	{"postgres", markPGRefused},         // the server rejected a job for good (the lane halts)
	{"postgres", markPGOutage},          // a call failed on an outage, and the job was retried
	{"postgres", markPGLookupFailed},    // the lookup after an ambiguous answer failed too
	{"postgres", markPGZombieCommit},    // a COMMIT sent by a process that then died landed
	{"postgres", markPGReplayNoop},      // a job replayed after it committed wrote nothing
	{"postgres", markPGOutOfOrder},      // a CDC change committed after a newer one of its identity
	{"iceberg", markIceConflict},        // another pipeline committed first; the sink looked and rebased
	{"iceberg", markIceConflictLanded},  // a conflict whose job was already in the table (an earlier attempt landed)
	{"iceberg", markIceAmbiguousLanded}, // a commit with no answer, found landed by the look
	{"iceberg", markIceAmbiguousLost},   // a commit with no answer, found absent: the Apply failed and was retried
	{"iceberg", markIceFoundSnapshot},   // a replayed job found in a snapshot's summary before writing
	{"iceberg", markIceFoundWatermark},  // a replayed job found by its log's high-water mark: its snapshot expired
	{"iceberg", markIceExpired},         // old snapshots expired to the retention
	{"iceberg", markIceEvolved},         // a column added to a table (or the race for it lost)
	{"iceberg", markIceOutage},          // a catalog request failed on an outage
	{"iceberg", markIceRewritten},       // a partition's small files rewritten into one
	{"iceberg", markIceRewriteLanded},   // a rewrite commit with no answer, found landed by the look
	{"iceberg", markIceRewriteConflict}, // a rewrite rebased on another pipeline's snapshot
	{"iceberg", markIceRewriteFailed},   // a rewrite given up (a damaged read, an outage, a lost commit), planned again later
	{"iceberg", markIceRewriteSplit},    // a rewrite's inputs wrote a column as two types: one schema group merged
}

// destMark is a destination mark and the destination kind that counts it.
type destMark struct{ kind, name string }

// optionalDestMarks are the destination marks an ordinary sweep need not
// reach, each with why.
var optionalDestMarks = map[string]string{
	markPGRefused: "needs the rare sink-refuse fault (a quarter of the swarm plans, once a world) in a postgres world: " +
		"3 worlds of 200 in a sweep; TestPostgresRefusalHalts reaches it",
	markIceRewriteSplit: "the world's columns are flat and never widen into an Iceberg sink, so no two files write a column " +
		"as different Arrow types (only structs of different fields do); sinks/iceberg TestPlanMergeTypesDiffer reaches it",
}

// coverage counts, for each mark, the worlds that reached it and the
// times it was passed in all; and the same for destination marks, with
// the destination kinds the worlds ran, and for world marks, with the
// marks some world's sources could reach.
type coverage struct {
	worlds     [engine.NumMarks]int
	hits       engine.Marks
	runs       int
	destWorlds map[string]int
	destHits   map[string]uint64
	kinds      map[string]bool
	world      markCounts
}

func coverageOf(outs []outcome) coverage {
	c := coverage{destWorlds: map[string]int{}, destHits: map[string]uint64{}, kinds: map[string]bool{}, world: newMarkCounts()}
	for _, out := range outs {
		c.world.add(out)
		c.runs++
		c.hits.Add(out.res.Marks)
		for m, n := range out.res.Marks {
			if n > 0 {
				c.worlds[m]++
			}
		}
		for _, k := range out.job.spec.Sinks {
			c.kinds[k.Kind] = true
		}
		for _, m := range destMarks {
			if n := out.res.DestMarks[m.name]; n > 0 {
				c.destWorlds[m.name]++
				c.destHits[m.name] += n
			}
		}
	}
	return c
}

// destUnreached lists the destination marks of the kinds the worlds ran
// that no world reached; required, only those not optional.
func (c coverage) destUnreached(required bool) []string {
	var out []string
	for _, m := range destMarks {
		if _, optional := optionalDestMarks[m.name]; c.kinds[m.kind] && c.destWorlds[m.name] == 0 && !(required && optional) {
			out = append(out, m.name)
		}
	}
	return out
}

// unreached lists the marks no world reached; required, only those not
// in optionalMarks.
func (c coverage) unreached(required bool) []engine.Mark {
	var out []engine.Mark
	for m := range engine.NumMarks {
		if _, optional := optionalMarks[m]; c.worlds[m] == 0 && !(required && optional) {
			out = append(out, m)
		}
	}
	return out
}

func printCoverage(outs []outcome) {
	c := coverageOf(outs)
	fmt.Printf("coverage over %d worlds (mark: worlds that reached it, times passed):\n", c.runs)
	for m := range engine.NumMarks {
		note := ""
		if _, ok := optionalMarks[m]; ok {
			note = " (optional)"
		}
		fmt.Printf("  %-26s %5d %9d%s\n", m, c.worlds[m], c.hits[m], note)
	}
	for _, m := range destMarks {
		if !c.kinds[m.kind] {
			continue
		}
		note := ""
		if _, ok := optionalDestMarks[m.name]; ok {
			note = " (optional)"
		}
		fmt.Printf("  %-26s %5d %9d%s\n", m.name, c.destWorlds[m.name], c.destHits[m.name], note)
	}
	var un, req []string
	for _, m := range c.unreached(false) {
		un = append(un, m.String())
	}
	for _, m := range c.unreached(true) {
		req = append(req, m.String())
	}
	un = append(un, c.destUnreached(false)...)
	req = append(req, c.destUnreached(true)...)
	c.world.print()
	un = append(un, c.world.unreached(false)...)
	req = append(req, c.world.unreached(true)...)
	if len(un) == 0 {
		fmt.Println("every mark was reached")
		return
	}
	fmt.Printf("%d marks no world reached: %s\n", len(un), strings.Join(un, " "))
	if len(req) > 0 {
		fmt.Printf("%d of them required: %s\n", len(req), strings.Join(req, " "))
	}
}
