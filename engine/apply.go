package engine

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// startJob runs one job: get the segment body (cache, one GET, or a
// stream for a body larger than the cache), decode only the job's PARTs
// (off the loop), hand them to the sink.
func (e *Engine) startJob(j *job) {
	sink, ok := e.p.Sinks.Sink(j.sinkRef)
	if !ok {
		j.state = jobRunning
		e.running++
		e.checkRunning()
		e.refuseJob(j, fmt.Errorf("segment %s: no sink %q is configured", j.seg.ID, j.sinkRef))
		return
	}
	size := j.seg.Index.BodyBytes
	_, cached := e.cache.entries[j.seg.ID]
	if !cached && size <= e.cache.budget && !e.cache.canHold(size) {
		e.mark(MarkWaitPinned)
		return // waits for pinned bodies to be released (compact runs again then)
	}
	j.state = jobRunning
	e.running++
	if !e.checkRunning() {
		return
	}
	e.withBody(j, func(b *segment.Body, release func(), err error) {
		if err != nil {
			e.jobFailed(j, err)
			return
		}
		var slices []*segment.Slice
		var derr error
		e.p.Exec.Go(func() { slices, derr = readSlices(b, j.ordinals) }, func() {
			if derr != nil {
				release()
				e.jobFailed(j, derr)
				return
			}
			e.apply(sink, j, slices, release)
		})
	})
}

func (e *Engine) apply(sink Sink, j *job, slices []*segment.Slice, release func()) {
	in := &Job{ID: j.id, Content: j.content, Origin: j.seg.Index.Origin, SinkRef: j.sinkRef, Namespace: j.namespace,
		Segment: j.seg.ID, SegmentCreatedUnixMs: j.seg.Index.CreatedAtUnixMs, Slices: slices}
	rows := in.Rows()
	sink.Apply(in, func(err error) {
		for _, s := range slices {
			s.Release()
		}
		release()
		if e.state == stateFailed {
			return
		}
		if errors.Is(err, ErrCannotApply) {
			e.mark(MarkSinkCannotApply)
			e.refuseJob(j, fmt.Errorf("sink %s refused job %s of segment %s: %w", j.sinkRef, j.id, j.seg.ID, err))
			return
		}
		if err != nil {
			e.failing(troubleSink(j.sinkRef, j.namespace), fmt.Errorf("job %s of segment %s: %w", j.id, j.seg.ID, err))
			e.retryJob(j) // sink down or flaky: the segment waits, nothing is lost
			return
		}
		e.succeeded(troubleSink(j.sinkRef, j.namespace))
		e.succeeded(troubleRead(j.sinkRef, j.namespace))
		e.stats.JobsApplied++
		e.stats.RowsApplied += uint64(rows)
		c := e.namespace(j.namespace)
		c.JobsApplied++
		c.RowsApplied += uint64(rows)
		e.jobDone(j, true)
	})
}

// jobFailed: corruption refuses the job for good; anything else retries.
func (e *Engine) jobFailed(j *job, err error) {
	if e.state == stateFailed {
		return
	}
	if errors.Is(err, ErrNotFound) {
		e.bodyMissing(j, err)
		return
	}
	if errors.Is(err, segment.ErrCorrupt) || errors.Is(err, ErrCorrupt) {
		e.refuseJob(j, fmt.Errorf("%w: compaction job %s of segment %s refused: %w", ErrCorrupt, j.id, j.seg.ID, err))
		return
	}
	e.failing(troubleRead(j.sinkRef, j.namespace), fmt.Errorf("job %s of segment %s: %w", j.id, j.seg.ID, err))
	e.retryJob(j)
}

func readSlices(b *segment.Body, ordinals []segment.SliceOrdinal) ([]*segment.Slice, error) {
	out := make([]*segment.Slice, 0, len(ordinals))
	for _, o := range ordinals {
		s, err := b.ReadSlice(o, memory.DefaultAllocator)
		if err != nil {
			for _, prev := range out {
				prev.Release()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// withBody gets a verified body for j and a release func: from the cache
// (pinned), by one GET into the cache, or — when the body is larger than
// the whole cache — by streaming it and keeping only j's PARTs.
func (e *Engine) withBody(j *job, done func(*segment.Body, func(), error)) {
	id := j.seg.ID
	unpin := func() { e.cache.unpin(id); e.compact() }
	if b, ok := e.cache.get(id); ok {
		done(b, unpin, nil)
		return
	}
	size := j.seg.Index.BodyBytes
	if size > e.cache.budget {
		e.mark(MarkBodyStreamed)
		e.streamBody(j, done)
		return
	}
	e.cache.reserved += size
	e.fetchBody(j.seg, func(b *segment.Body, err error) {
		e.cache.reserved -= size
		if err != nil {
			done(nil, nil, err)
			return
		}
		if !e.cache.put(id, b, size, true) {
			// The budget shrank meanwhile: use the body once, uncached.
			e.mark(MarkBodyUncached)
			done(b, func() { e.compact() }, nil)
			return
		}
		done(b, unpin, nil)
	})
}

// fetchBody GETs a whole body and checks it against its marker.
func (e *Engine) fetchBody(st *segState, done func(*segment.Body, error)) {
	key := e.layout.Key(st.Dir, st.ID, KindBody)
	var b *segment.Body
	e.mark(MarkBodyFetched)
	in := GetObjectInput{Key: key, Limit: st.Index.BodyBytes}
	e.getVerified(in, MarkBodyMismatch, func(raw []byte, _ ObjectInfo) (err error) {
		b, err = segment.CheckBody(st.Index, key, segment.Bytes(raw), int64(len(raw)))
		return err
	}, func(_ []byte, _ ObjectInfo, err error) {
		if err != nil {
			done(nil, fmt.Errorf("read body %s: %w", key, err))
			return
		}
		done(b, nil)
	})
}
