package iceberg

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// What a commit records, and how a job is found applied.
//
// Every snapshot the sink commits carries, in its summary, the job it
// applies (one job, one snapshot):
//
//	skipprd.compaction-id  the job's ID (engine.Job.ID)
//	skipprd.content        the job's Content: what a replay compares
//	skipprd.pipeline       its origin's pipeline and WAL id (not for a
//	skipprd.wal-id         legacy job, whose Origin is zero)
//	skipprd.segment        the segment whose cut ends the job
//
// and sets one table property, in the same atomic commit:
//
//	skipprd.applied.{wal-id}.{sink-ref} = {first segment}/{first ordinal}
//
// the position of the job's first PART. The engine runs the jobs of one
// lane — one (sink, namespace), so one table — one at a time, in the
// order of their first PART (engine/compact.go), so every job of that
// log and sink at or before this position was committed first: the
// property is a high-water mark, the Flink sink's
// flink.max-committed-checkpoint-id for a log. It is what finds a job
// applied once the snapshot that applied it has been expired; the
// summaries are what find it before (and what people and the oracle
// read). It grows by one property per log and sink that ever wrote the
// table.

// Summary and property keys.
const (
	SummaryCompactionID = "skipprd.compaction-id"
	SummaryContent      = "skipprd.content"
	SummaryPipeline     = "skipprd.pipeline"
	SummaryWALID        = "skipprd.wal-id"
	SummarySegment      = "skipprd.segment"
	propAppliedPrefix   = "skipprd.applied."
)

// position is where a job's first PART sits in its log: lane order.
type position struct {
	segment engine.SnapshotID
	ordinal segment.SliceOrdinal
}

func (p position) String() string { return fmt.Sprintf("%s/%d", p.segment, p.ordinal) }

func (p position) after(q position) bool {
	if c := p.segment.Compare(q.segment); c != 0 {
		return c > 0
	}
	return p.ordinal > q.ordinal
}

func parsePosition(s string) (position, bool) {
	seg, ord, ok := strings.Cut(s, "/")
	if !ok {
		return position{}, false
	}
	id, ok := engine.ParseSnapshotID(seg)
	n, err := strconv.ParseUint(ord, 10, 32)
	if !ok || err != nil {
		return position{}, false
	}
	return position{segment: id, ordinal: segment.SliceOrdinal(n)}, true
}

// jobPosition is the position of job's first PART.
// REQUIRES: job has slices.
func jobPosition(job *engine.Job) position {
	if len(job.Slices) == 0 {
		panic(fmt.Sprintf("iceberg: job %s has no slices", job.ID))
	}
	first := job.Segment
	if len(job.Segments) > 0 {
		first = job.Segments[0]
	}
	return position{segment: first, ordinal: job.Slices[0].Entry.Ordinal}
}

// watermarkKey is the table property holding the high-water mark of
// job's log for sinkRef; "" for a legacy job (no WAL id to name).
func watermarkKey(job *engine.Job, sinkRef string) string {
	if job.Origin.IsZero() {
		return ""
	}
	return propAppliedPrefix + job.Origin.WAL.String() + "." + sinkRef
}

// summary is what job's snapshot records.
func summary(job *engine.Job) map[string]string {
	m := map[string]string{
		SummaryCompactionID: job.ID,
		SummaryContent:      job.Content,
		SummarySegment:      job.Segment.String(),
	}
	if !job.Origin.IsZero() {
		m[SummaryPipeline] = job.Origin.Pipeline
		m[SummaryWALID] = job.Origin.WAL.String()
	}
	return m
}

// found is what a look at a table says of a job.
type found uint8

const (
	notFound    found = iota
	bySnapshot        // a retained snapshot's summary names it, same content
	byWatermark       // its log's high-water mark is at or past it
)

// lookup looks for job in t: in the retained snapshots' summaries, then
// the high-water mark. A snapshot naming the job with another content
// is a collision: an error wrapping engine.ErrCannotApply and
// engine.ErrIDCollision. A mark that does not parse is corruption of the
// table's properties, an error too (never read as "not applied").
func lookup(t *Table, job *engine.Job, sinkRef string) (found, error) {
	for i := len(t.Snapshots) - 1; i >= 0; i-- {
		s := t.Snapshots[i]
		if s.Summary[SummaryCompactionID] != job.ID {
			continue
		}
		if c := s.Summary[SummaryContent]; c != job.Content {
			return notFound, fmt.Errorf("iceberg: table %s: snapshot %d applied compaction id %s with content %q (pipeline %q, WAL %q); this job's content is %s: %w: %w",
				t.Ident, s.ID, job.ID, c, s.Summary[SummaryPipeline], s.Summary[SummaryWALID], job.Content, engine.ErrCannotApply, engine.ErrIDCollision)
		}
		return bySnapshot, nil
	}
	key := watermarkKey(job, sinkRef)
	if key == "" {
		return notFound, nil
	}
	v, ok := t.Props[key]
	if !ok {
		return notFound, nil
	}
	mark, ok := parsePosition(v)
	if !ok {
		return notFound, fmt.Errorf("iceberg: table %s: property %s = %q is not a segment/ordinal position", t.Ident, key, v)
	}
	if jobPosition(job).after(mark) {
		return notFound, nil
	}
	return byWatermark, nil
}

// appendFor is the commit of job's files: its summary, and its log's
// high-water mark moved to the job.
// REQUIRES: lookup(t, job) found nothing — so the mark only moves forward.
func appendFor(t *Table, job *engine.Job, sinkRef string, files []DataFile) Append {
	a := Append{Files: files, Summary: summary(job), Props: map[string]string{}}
	if key := watermarkKey(job, sinkRef); key != "" {
		pos := jobPosition(job)
		if v, ok := t.Props[key]; ok {
			if mark, ok := parsePosition(v); !ok || !pos.after(mark) {
				panic(fmt.Sprintf("iceberg: table %s: committing job %s at %s, but its log's mark %s = %q is not before it", t.Ident, job.ID, pos, key, v))
			}
		}
		a.Props[key] = pos.String()
	}
	return a
}
