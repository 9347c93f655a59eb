package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/skipprd/skipprd/engine/segment"
)

// compactionID names a job for its sink, which dedupes on it
// (docs/DESIGN.md §8.1). It is a pure function of the committed cut that
// ends the job — the log, the cutting segment, the group and where the job
// starts — so a job replayed after a crash, on a new host or past a zombie
// has the same id:
//
//	{pipeline}-hex(SHA-256("skipprd-job 3" 0 wal_id pipeline 0
//	    cut_snapshot_id 0 first_snapshot_id 0 sink_ref 0 namespace 0
//	    schema as u64 LE | cdc as u8))[:32]
//
// The WAL id makes ids unique across logs (snapshot ids start at
// 000000000001-000000000001 in every log, and two pipelines writing one
// destination must never meet each other's ids); the pipeline name is
// there for people reading a file name or a row.
//
// REQUIRES: o names a log (a segment of spanning jobs has one: the writer
// sets it, a marker without it does not decode) — without it, two logs'
// jobs would share ids.
func compactionID(o segment.Origin, cut SnapshotID, c segment.Cut) string {
	if o.WAL.IsZero() || o.Pipeline == "" {
		panic(fmt.Sprintf("engine: a spanning job's id names its log: cut of %s in segment %s, origin WAL zero %t, pipeline %q",
			c.Group, cut, o.WAL.IsZero(), o.Pipeline))
	}
	h := sha256.New()
	h.Write([]byte("skipprd-job 3\x00"))
	h.Write(o.WAL[:])
	h.Write([]byte(o.Pipeline))
	h.Write([]byte{0})
	h.Write([]byte(cut.String()))
	h.Write([]byte{0})
	h.Write([]byte(SnapshotID{Epoch: c.First.Epoch, Seq: c.First.Seq}.String()))
	h.Write([]byte{0})
	h.Write([]byte(c.Group.SinkRef))
	h.Write([]byte{0})
	h.Write([]byte(c.Group.Namespace))
	h.Write([]byte{0})
	var b [9]byte
	binary.LittleEndian.PutUint64(b[:], uint64(c.Group.Schema))
	if c.Group.CDC {
		b[8] = 1
	}
	h.Write(b[:])
	return o.Pipeline + "-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// legacyCompactionID is the id of a job of a segment committed before
// spanning jobs (a version 1 or 2 marker): one job per group per segment,
// named by the segment and its ordinals (sorted, in index order):
//
//	origin set:  {pipeline}-hex(SHA-256("skipprd-job 2" 0 wal_id pipeline 0
//	                 snapshot_id 0 sink_ref 0 ordinals as u32 LE))[:32]
//	no origin:   hex(SHA-256(snapshot_id 0 sink_ref 0 ordinals as u32 LE))[:32]
//
// Such a segment keeps the ids it had, so a job applied under one before
// an upgrade is found applied after it.
//
// REQUIRES: ordinals ascending (index order: an index lists its PARTs by
// ordinal, and that order is the id's).
func legacyCompactionID(o segment.Origin, id SnapshotID, ordinals []segment.SliceOrdinal, sinkRef string) string {
	for i := 1; i < len(ordinals); i++ {
		if ordinals[i-1] >= ordinals[i] {
			panic(fmt.Sprintf("engine: a legacy job's id lists its ordinals ascending: segment %s, sink %s, ordinal %d at %d after %d",
				id, sinkRef, ordinals[i], i, ordinals[i-1]))
		}
	}
	h := sha256.New()
	if !o.IsZero() {
		h.Write([]byte("skipprd-job 2\x00"))
		h.Write(o.WAL[:])
		h.Write([]byte(o.Pipeline))
		h.Write([]byte{0})
	}
	h.Write([]byte(id.String()))
	h.Write([]byte{0})
	h.Write([]byte(sinkRef))
	h.Write([]byte{0})
	writeOrdinals(h, ordinals)
	sum := hex.EncodeToString(h.Sum(nil)[:16])
	if o.IsZero() {
		return sum
	}
	return o.Pipeline + "-" + sum
}

// jobContent fingerprints exactly the rows a job carries: each of its
// segments' body checksum and the job's ordinals in it, in order. A sink
// records it beside the job's id and, finding the id already applied,
// compares: another content under the same id is another job
// (ErrIDCollision), never "applied".
func (e *Engine) jobContent(j *job) string {
	h := sha256.New()
	h.Write([]byte("skipprd-job-content 2\x00"))
	if len(j.pieces) == 0 {
		e.broken("a job's content fingerprints ≥ 1 piece: job %s (cut in segment %s, %s) has none", j.id, j.cut.ID, j.group)
		return ""
	}
	for _, p := range j.pieces {
		for i := 1; i < len(p.ordinals); i++ {
			if p.ordinals[i-1] >= p.ordinals[i] {
				e.broken("a job's content lists each piece's ordinals ascending: job %s, segment %s, ordinal %d at %d after %d",
					j.id, p.seg.ID, p.ordinals[i], i, p.ordinals[i-1])
				return ""
			}
		}
		h.Write(p.seg.Index.BodySum[:])
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(p.ordinals)))
		h.Write(n[:])
		writeOrdinals(h, p.ordinals)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// legacyJobContent is jobContent of a one-segment job of a segment
// committed before spanning jobs, as those builds computed it.
func legacyJobContent(bodySum [32]byte, ordinals []segment.SliceOrdinal) string {
	h := sha256.New()
	h.Write([]byte("skipprd-job-content 1\x00"))
	h.Write(bodySum[:])
	writeOrdinals(h, ordinals)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func writeOrdinals(h hash.Hash, ordinals []segment.SliceOrdinal) {
	var b [4]byte
	for _, o := range ordinals {
		binary.LittleEndian.PutUint32(b[:], uint32(o))
		h.Write(b[:])
	}
}
