package engine

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// startJob runs one job: for each of its pieces, get the segment body
// (cache, one GET, or a stream for a body larger than the cache) and
// decode only the job's PARTs (off the loop), segment after segment; then
// hand them all to the sink.
func (e *Engine) startJob(j *job) {
	if j.state != jobPending || len(j.pieces) == 0 {
		// A job runs once at a time: a second start would count it in
		// running twice and hand its slices to the sink twice at once.
		e.broken("a job starts only while pending, with pieces: job %s (cut in segment %s) in state %d, %d pieces, %d running",
			j.id, j.cut.ID, j.state, len(j.pieces), e.running)
		return
	}
	// A segment is reclaimed only once every job of it is applied
	// (checkReclaimable): a job of one being deleted would read a body
	// that goes, and apply PARTs its bitmap is about to forget.
	dead := j.cut
	if !dead.reclaiming && !dead.gone {
		dead = nil
		for _, p := range j.pieces {
			if p.seg.reclaiming || p.seg.gone {
				dead = p.seg
				break
			}
		}
	}
	if dead != nil {
		e.broken("a job starts on live segments only: job %s (cut in segment %s) holds segment %s, reclaiming %t, gone %t",
			j.id, j.cut.ID, dead.ID, dead.reclaiming, dead.gone)
		return
	}
	if err := e.unstartable(j); err != nil {
		j.state = jobRunning
		e.running++
		e.checkRunning()
		e.refuseJob(j, err)
		return
	}
	first := j.first()
	size := first.Index.BodyBytes
	_, cached := e.cache.entries[first.ID]
	if !cached && size <= e.cache.budget && !e.cache.canHold(size) {
		e.mark(MarkWaitPinned)
		return // waits for pinned bodies to be released (compact runs again then)
	}
	if j.spans() && e.running > 0 && !e.cache.canHold(j.bytes) {
		e.mark(MarkWaitPinned)
		return // its slices would not fit the pool's share next to the others'
	}
	j.state = jobRunning
	e.running++
	if !e.checkRunning() {
		return
	}
	if j.spans() {
		// Its slices are copied out of each body (gather), and held
		// until the sink answers: they count against the cache's share
		// of the memory pool meanwhile.
		e.mark(MarkJobSpans)
		e.cache.reserved += j.bytes
	}
	e.gather(j, 0, nil, nil)
}

// unstartable says why j can never be applied, or nil: no sink of its
// ref, or PARTs of a lost bitmap that may have been applied already
// (unboundedLost).
func (e *Engine) unstartable(j *job) error {
	if _, ok := e.p.Sinks.Sink(j.sinkRef()); !ok {
		return fmt.Errorf("job %s (cut in segment %s): no sink %q is configured", j.id, j.cut.ID, j.sinkRef())
	}
	if j.unknown != nil {
		return fmt.Errorf("%w: job %s (cut in segment %s) holds PARTs of segment %s, whose completion bitmap "+
			"was unreadable and which no live cut bounded: an earlier job may have applied them", ErrCorrupt, j.id, j.cut.ID, j.unknown.ID)
	}
	return nil
}

// spans reports whether j holds PARTs of more than one segment.
func (j *job) spans() bool {
	return len(j.pieces) > 1 && j.pieces[0].seg != j.pieces[len(j.pieces)-1].seg
}

// unreserve ends what a running spanning job holds of the memory pool.
// It runs once per start, before the job ends (the sink's answer or a
// failed read releases first): at another time it would end a
// reservation twice, or one never made.
func (e *Engine) unreserve(j *job) {
	if j.spans() {
		if j.state != jobRunning {
			e.broken("a spanning job's reservation ends while it runs: job %s (cut in segment %s) in state %d, %d bytes, %d reserved",
				j.id, j.cut.ID, j.state, j.bytes, e.cache.reserved)
			return
		}
		e.cache.reserved -= j.bytes
		e.cache.check(false)
	}
}

// gather reads the slices of j's pieces from i on, then applies them.
// got and releases are what earlier pieces read.
//
// A job that spans segments reads its slices from a detached body (a
// copy of its PARTs' bytes) and lets each body go as soon as they are
// read, so it holds its own rows and one body at a time — not every body
// it touched. A job of one segment reads in place and keeps the body
// pinned until the sink answers.
func (e *Engine) gather(j *job, i int, got []*segment.Slice, releases []func()) {
	if i < 0 || i > len(j.pieces) || len(releases) > i {
		e.broken("a job gathers its pieces in order, one release per body held: piece %d of %d, %d releases", i, len(j.pieces), len(releases))
		return
	}
	if j.state != jobRunning {
		// Only a running job is counted in running and ended once
		// (checkJobEnds): one gathering otherwise would end it again.
		e.broken("a job gathers its pieces while it runs: job %s (cut in segment %s) in state %d at piece %d of %d", j.id, j.cut.ID, j.state, i, len(j.pieces))
		return
	}
	releaseAll := func() {
		for _, s := range got {
			s.Release()
		}
		for _, r := range releases {
			r()
		}
		e.unreserve(j)
	}
	if i == len(j.pieces) {
		if held := len(releases); j.spans() && held != 0 || !j.spans() && held != i {
			// A job of one segment holds its body pinned until the sink
			// answers; one that spans holds copies and no body: a release
			// lost here would pin a body for good.
			e.broken("a job holds one body per piece read in place, none when it copies: job %s (cut in segment %s), %d pieces, spans %t, %d bodies held",
				j.id, j.cut.ID, i, j.spans(), held)
			releaseAll()
			return
		}
		sink, _ := e.p.Sinks.Sink(j.sinkRef())
		e.apply(sink, j, got, releaseAll)
		return
	}
	p := j.pieces[i]
	e.withBody(j, p, func(b *segment.Body, release func(), err error) {
		if err != nil {
			releaseAll()
			e.jobFailed(j, p.seg, err)
			return
		}
		src, spans := b, j.spans()
		if spans {
			src = b.Detached()
		}
		var slices []*segment.Slice
		var derr error
		decoded := false
		e.p.Exec.Go(func() { slices, derr = readSlices(src, p.ordinals) }, func() {
			if decoded {
				// The executor's done runs once: a second would gather the
				// same piece's slices twice.
				e.broken("the executor answers a piece's decode once: job %s, piece %d of %d in segment %s answered again", j.id, i, len(j.pieces), p.seg.ID)
				return
			}
			decoded = true
			if derr != nil {
				release()
				releaseAll()
				e.jobFailed(j, p.seg, derr)
				return
			}
			if spans {
				release() // the slices hold copies
				e.gather(j, i+1, append(got, slices...), releases)
				return
			}
			e.gather(j, i+1, append(got, slices...), append(releases, release))
		})
	})
}

func (e *Engine) apply(sink Sink, j *job, slices []*segment.Slice, release func()) {
	if j.state != jobRunning {
		e.broken("a job is applied only while it runs: job %s (cut in segment %s) in state %d", j.id, j.cut.ID, j.state)
		release()
		return
	}
	if parts := j.parts(); len(slices) != parts {
		e.broken("a job applies one slice per PART it holds: job %s (cut in segment %s), %d slices, %d PARTs in %d pieces",
			j.id, j.cut.ID, len(slices), parts, len(j.pieces))
		release()
		return
	}
	in := &Job{ID: j.id, Content: j.content, Origin: j.cut.Index.Origin, SinkRef: j.sinkRef(), Namespace: j.namespace(),
		Segment: j.cut.ID, SegmentCreatedUnixMs: j.cut.Index.CreatedAtUnixMs, Segments: j.segmentIDs(), Slices: slices}
	rows := in.Rows()
	answered := false
	sink.Apply(in, func(err error) {
		if answered {
			// Sink's contract: done runs once. A second answer would
			// release the job's bodies twice and end the job twice.
			e.broken("a sink answers a job once: job %s (cut in segment %s) answered again with %v", j.id, j.cut.ID, err)
			return
		}
		answered = true
		release()
		if e.state == stateFailed {
			return
		}
		if errors.Is(err, ErrCannotApply) {
			e.mark(MarkSinkCannotApply)
			e.refuseJob(j, fmt.Errorf("sink %s refused job %s (cut in segment %s): %w", j.sinkRef(), j.id, j.cut.ID, err))
			return
		}
		if err != nil {
			e.failing(troubleSink(j.sinkRef(), j.namespace()), fmt.Errorf("job %s (cut in segment %s): %w", j.id, j.cut.ID, err))
			e.retryJob(j) // sink down or flaky: the segments wait, nothing is lost
			return
		}
		e.succeeded(troubleSink(j.sinkRef(), j.namespace()))
		e.succeeded(troubleRead(j.sinkRef(), j.namespace()))
		e.stats.JobsApplied++
		e.stats.RowsApplied += uint64(rows)
		c := e.namespace(j.namespace())
		c.JobsApplied++
		c.RowsApplied += uint64(rows)
		e.jobDone(j, true)
	})
}

// parts counts the PARTs j holds: O(pieces).
func (j *job) parts() (n int) {
	for _, p := range j.pieces {
		n += len(p.ordinals)
	}
	return n
}

// segmentIDs lists the segments j holds PARTs of, ascending.
func (j *job) segmentIDs() []SnapshotID {
	segs := segmentsOf(j.pieces)
	out := make([]SnapshotID, len(segs))
	for i, st := range segs {
		out[i] = st.ID
	}
	return out
}

// jobFailed: corruption refuses the job for good; anything else retries.
// st is the segment whose body could not be read.
func (e *Engine) jobFailed(j *job, st *segState, err error) {
	if e.state == stateFailed {
		return
	}
	if errors.Is(err, ErrNotFound) {
		e.bodyMissing(j, st, err)
		return
	}
	if errors.Is(err, segment.ErrCorrupt) || errors.Is(err, ErrCorrupt) {
		e.refuseJob(j, fmt.Errorf("%w: compaction job %s refused: segment %s: %w", ErrCorrupt, j.id, st.ID, err))
		return
	}
	e.failing(troubleRead(j.sinkRef(), j.namespace()), fmt.Errorf("job %s: segment %s: %w", j.id, st.ID, err))
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

// withBody gets a verified body for piece p of j and a release func:
// from the cache (pinned), by one GET into the cache, or — when the body
// is larger than the whole cache — by streaming it and keeping only p's
// PARTs.
func (e *Engine) withBody(j *job, p piece, done func(*segment.Body, func(), error)) {
	id := p.seg.ID
	unpin := func() { e.cache.unpin(id); e.compact() }
	if b, ok := e.cache.get(id); ok {
		done(b, unpin, nil)
		return
	}
	size := p.seg.Index.BodyBytes
	if size > e.cache.budget {
		e.mark(MarkBodyStreamed)
		e.streamBody(p, done)
		return
	}
	e.cache.reserved += size
	e.fetchBody(p.seg, func(b *segment.Body, err error) {
		e.cache.reserved -= size
		if e.cache.reserved < 0 {
			e.broken("body cache reserved bytes ≥ 0: %d after the fetch of segment %s (%d bytes) answered", e.cache.reserved, id, size)
			return
		}
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
