package engine

import (
	"errors"
	"testing"

	"github.com/skipprd/skipprd/engine/wal"
)

// TestInvariantDiskRecovery breaks on purpose the checks of the disk
// WAL's recovery — its scan of the log (wal_disk_recover.go) and its
// replay (wal_disk_replay.go) — that a test reaches without ports.
func TestInvariantDiskRecovery(t *testing.T) {
	cases := []breakCase{
		// wal_disk_recover.go.
		{"log-read-after-accept", "the log is read before any unit is accepted: round 0, 1 units in flight", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.inFlight, l.queuedBytes = 1, 10
			var got error
			l.recoverLog(0, func(err error) { got = err })
			if !errors.Is(got, ErrInvariant) {
				t.Errorf("done got %v; want the invariant", got)
			}
		}},
		{"partition-read-twice", "recovery reads a partition's segments together: partition 0 read again after 2 others", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 2)
			l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
			for _, id := range []uint32{0, 1} {
				l.scan.parts = append(l.scan.parts, &partScan{p: l.log.Partition(id), scan: wal.NewPartitionScan(id), units: map[uint64]*unitScan{}})
			}
			l.readSegment(l.log.Partition(0), &wal.Segment{Num: 3, Path: "wal/partition-0/3"}, nil)
		}},
		{"seal-outside-its-mask", "a seal record is logged in a partition its mask names: snapshot 000000000001-000000000002 read in partition 1, mask 0x1", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 2)
			l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
			l.addSeal(1, &wal.Segment{}, wal.SealRecord{Snapshot: wal.SnapshotRef{Epoch: 1, Seq: 2}, Partitions: 1})
		}},
		{"seals-disagree", "every seal record of a snapshot agrees: snapshot 000000000001-000000000002 sealed with created 5", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 2)
			l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
			rec := wal.SealRecord{Snapshot: wal.SnapshotRef{Epoch: 1, Seq: 2}, CreatedUnixMs: 5, Dir: "d", Partitions: 3, Ranges: []wal.SeqRange{{Lo: 1, Hi: 1}}}
			l.addSeal(0, &wal.Segment{}, rec)
			rec.CreatedUnixMs = 6
			l.addSeal(1, &wal.Segment{}, rec)
		}},

		// wal_disk_replay.go.
		{"replay-on-a-busy-writer", "replay starts on an empty writer: live 0 units, 1 queued", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
			e.queue = []*snapshot{{id: SnapshotID{1, 1}, content: newBatchSet()}}
			l.replay(nil)
		}},
		{"replay-at-or-above-the-claim", "a rebuilt generation's id is below the epoch recovery claimed: snapshot 000000000003-000000000001, epoch 3", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.epoch = 3
			id := SnapshotID{3, 1}
			l.scan = &logScan{
				seals:   map[SnapshotID]*sealScan{id: {id: id, mask: 1, ranges: map[uint32][]wal.SeqRange{0: {{Lo: 1, Hi: 1}}}}},
				flushed: map[SnapshotID]uint64{},
				parts:   []*partScan{{p: l.log.Partition(0), units: map[uint64]*unitScan{1: {}}}},
			}
			l.replay(nil)
		}},
		{"replayed-unit-without-sequence", "a replayed unit has its sequence number and joins a generation: wal/partition-0/1, sequence 0, generation 1", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			into := newBatchSet()
			into.gen = 1
			l.replayUnit(&unitScan{seg: &wal.Segment{Path: "wal/partition-0/1"}}, 0, into)
		}},
		{"replay-live-not-empty", "replay puts each unclaimed unit into live, or a snapshot sealed from it, once: live holds 1 units, 0 sealed, 0 replayed", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen, e.live.units = 1, []*unit{{}}
			l.replayLive(&logScan{})
		}},
		{"replay-seals-empty-live", "replay seals live only when it holds units, of a generation the log handed out: live 0 units, generation 1, next 1", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.live.gen, l.nextGen = 1, 1
			l.sealReplayed()
		}},
		{"snapshot-sealed-unclaimed", "a snapshot is sealed under a claimed epoch: epoch 0, next seq 0, 0 units", func(t *testing.T, e *Engine) {
			e.epoch, e.nextSeq = 0, 0
			e.newSnapshot(newBatchSet())
		}},
		{"logged-unit-unreadable", "a logged unit decodes: wal/partition-0/1", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			into := newBatchSet()
			into.gen = 1
			l.replayUnit(&unitScan{rec: wal.UnitRecord{Seq: 1, Arrow: []byte("not arrow")}, seg: &wal.Segment{Path: "wal/partition-0/1"}}, 0, into)
		}},
		{"replayed-committed-twice", "replayPending ≥ 0: -1 after unit 4 of partition 0 committed", func(t *testing.T, e *Engine) {
			e.dlog = testDiskLog(e, 1)
			e.replayedCommitted(&unit{seq: 4, replayed: true})
		}},
		{"replayed-unit-without-disk-log", "a replayed unit is the disk WAL's: unit 4 of partition 0 committed under engine.s3Log", func(t *testing.T, e *Engine) {
			e.dlog = s3Log{e}
			e.replayedCommitted(&unit{seq: 4, replayed: true})
		}},
		{"owned-ids-twice", "owned segments have distinct ids: 2 owned, 1 ids", func(t *testing.T, e *Engine) {
			e.segs = []*segState{{Segment: Segment{ID: SnapshotID{1, 1}}}, {Segment: Segment{ID: SnapshotID{1, 1}}}}
			e.ownedByID()
		}},
		{"replayed-commit-of-a-new-unit", "only a replayed unit, logged, is released by its generation's commit: replayed false, partition 0, sequence 4", func(t *testing.T, e *Engine) {
			l := testDiskLog(e, 1)
			e.dlog, l.replayPending = l, 1
			e.replayedCommitted(&unit{seq: 4})
			if l.replayPending != 1 {
				t.Errorf("replayPending %d: the refused unit was counted out", l.replayPending)
			}
		}},
	}
	runBreaks(t, cases)
}
