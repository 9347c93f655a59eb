package engine

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/skipprd/skipprd/engine/segment"
)

// Streaming a body larger than the cache (docs/DESIGN.md §8.3): ranged GETs of
// StreamChunkBytes, every byte hashed, only the windows of the job's PARTs
// kept, the body opened once the whole-body SHA-256 matches its marker.
//
// A pass whose hash does not match had a chunk damaged on the way — or
// the body is damaged in the store. Only the whole body carries a
// checksum, so a long stream would rarely come out clean if every pass
// had to be perfect. So later passes check each chunk against the
// previous pass: a chunk whose CRC-32C matches what was read before is
// taken (two independent reads agree), one that differs is read again
// until two reads agree. A pass in which every chunk agreed with the
// previous one and the hash still does not match read the same bytes
// twice: the body itself is bad — corrupt, no more passes.

// streamBody streams j's body, up to AttemptsMax passes.
func (e *Engine) streamBody(p piece, done func(*segment.Body, func(), error)) {
	var prev []uint32 // the previous pass's chunk checksums
	var pass func(n int)
	pass = func(n int) {
		e.streamOnce(p, prev, func(b *segment.Body, sums []uint32, err error) {
			sameBytes := prev != nil && slices.Equal(sums, prev)
			switch {
			case err == nil:
				done(b, func() { e.compact() }, nil)
			case errors.Is(err, segment.ErrCorrupt) && n+1 < AttemptsMax && !sameBytes:
				e.mark(MarkBodyMismatch)
				prev = sums
				e.p.Timers.AfterFunc(e.backoff(n), func() { pass(n + 1) })
			default:
				done(nil, nil, err)
			}
		})
	}
	pass(0)
}

// streamOnce is one pass of streamBody; prev (nil in the first pass) are
// the previous pass's chunk checksums, which each chunk must agree with or
// be read again. done gets this pass's checksums.
func (e *Engine) streamOnce(p piece, prev []uint32, done func(*segment.Body, []uint32, error)) {
	st := p.seg
	key := e.layout.Key(st.Dir, st.ID, KindBody)
	check := segment.NewStreamCheck(key, st.Index)
	windows := make([]segment.Window, len(p.ordinals))
	for i, o := range p.ordinals {
		if int(o) >= len(st.Index.Entries) {
			e.broken("a piece's ordinals are its segment's PARTs: %s ordinal %d of %d PARTs", key, o, len(st.Index.Entries))
			done(nil, nil, e.err)
			return
		}
		off, n := segment.PartWindow(st.Index.Entries[o])
		windows[i] = segment.Window{Off: off, Bytes: make([]byte, 0, n)}
	}
	chunk := max(e.cfg.StreamChunkBytes, 1)
	chunks := int((st.Index.BodyBytes + chunk - 1) / chunk) // the loop's limit
	var sums []uint32
	var next func(at int64)
	next = func(at int64) {
		if len(sums) > chunks {
			e.broken("a stream reads its body in at most ceil(body/chunk) reads: %s, %d reads, body %d, chunk %d", key, len(sums), st.Index.BodyBytes, chunk)
			done(nil, sums, e.err)
			return
		}
		if at >= st.Index.BodyBytes {
			if !e.checkStreamed(key, windows, len(sums), chunks) {
				done(nil, sums, e.err)
				return
			}
			if err := check.Done(); err != nil {
				done(nil, sums, err)
				return
			}
			done(segment.WindowBody(key, st.Index, windows), sums, nil)
			return
		}
		rng := &ByteRange{Start: at, Length: min(chunk, st.Index.BodyBytes-at)}
		var seen []uint32
		if i := len(sums); prev != nil && i < len(prev) {
			seen = append(seen, prev[i])
		}
		e.readAgreed(key, rng, seen, func(got []byte, sum uint32, err error) {
			if err != nil {
				done(nil, sums, fmt.Errorf("stream body %s: %w", key, err))
				return
			}
			sums = append(sums, sum)
			check.Write(got)
			keepWindows(windows, at, got)
			next(at + rng.Length)
		})
	}
	next(0)
}

// checkStreamed: a pass that reached the body's end read each chunk once
// (one checksum per chunk: the next pass compares them one to one) and
// filled every window of the piece. O(PARTs of the piece), once per pass.
func (e *Engine) checkStreamed(key string, windows []segment.Window, reads, chunks int) bool {
	if reads != chunks {
		e.broken("a whole pass reads each chunk of its body once: %s, %d reads, %d chunks", key, reads, chunks)
		return false
	}
	for i, w := range windows {
		if len(w.Bytes) != cap(w.Bytes) {
			e.broken("a whole pass fills every PART window: %s window %d at %d holds %d of %d bytes", key, i, w.Off, len(w.Bytes), cap(w.Bytes))
			return false
		}
	}
	return true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readAgreed reads one chunk. With no earlier checksum of it (seen
// empty) one read will do; otherwise the chunk is read until its checksum
// matches one already seen — two reads agree — up to AttemptsMax reads,
// after which the last one is returned (the pass's hash then decides).
func (e *Engine) readAgreed(key string, rng *ByteRange, seen []uint32, done func([]byte, uint32, error)) {
	if rng.Start < 0 || rng.Length <= 0 {
		e.broken("a ranged read asks for bytes: %s range [%d,+%d)", key, rng.Start, rng.Length)
		done(nil, 0, e.err)
		return
	}
	in := GetObjectInput{Key: key, Range: rng, Limit: rng.Length}
	var read func(n int)
	read = func(n int) {
		e.getVerified(in, MarkBodyMismatch, func(b []byte, _ ObjectInfo) error {
			if int64(len(b)) != rng.Length {
				return fmt.Errorf("range [%d,+%d) of %s returned %d bytes", rng.Start, rng.Length, key, len(b))
			}
			return nil
		}, func(got []byte, _ ObjectInfo, err error) {
			if err != nil {
				done(nil, 0, err)
				return
			}
			sum := crc32.Checksum(got, castagnoli)
			if len(seen) == 0 || slices.Contains(seen, sum) || n+1 >= AttemptsMax {
				done(got, sum, nil)
				return
			}
			e.mark(MarkChunkReread)
			seen = append(seen, sum)
			read(n + 1)
		})
	}
	read(0)
}

// keepWindows copies the parts of chunk (at body offset at) that fall in
// the windows.
//
// REQUIRES: chunks come in body order, without gaps: a window not yet
// full holds every byte of it before at (a byte skipped would shift the
// rest of its PART's bytes).
func keepWindows(windows []segment.Window, at int64, chunk []byte) {
	end := at + int64(len(chunk))
	for i := range windows {
		w := &windows[i]
		if filled := w.Off + int64(len(w.Bytes)); filled < at && len(w.Bytes) < cap(w.Bytes) {
			panic(fmt.Sprintf("engine: a streamed body's chunks come in order, without gaps: window %d at %d holds %d of %d bytes, next chunk at %d",
				i, w.Off, len(w.Bytes), cap(w.Bytes), at))
		}
		lo := max(at, w.Off+int64(len(w.Bytes)))
		hi := min(end, w.Off+int64(cap(w.Bytes)))
		if lo < hi {
			w.Bytes = append(w.Bytes, chunk[lo-at:hi-at]...)
		}
	}
}
