package engine

import (
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine/wal"
)

// logHooks is what the disk WAL's log (wal.Log) tells the engine: a unit
// durable or of unknown outcome, a segment poisoned, a segment that could
// not be created, an invariant broken. Each runs on the loop.
type logHooks struct{ l *diskLog }

func (h logHooks) Durable(w *wal.Write[logJoin], seq uint64, seg *wal.Segment) {
	if u := w.Unit.u; u == nil || seq == 0 {
		h.l.e.broken("a durable entry is a held unit's, with a sequence number: unit %p, sequence %d", u, seq)
		return
	}
	h.l.unitDurable(w, seq, seg)
}

// Unknown answers a unit of a failed batch: it is no longer held, and its
// source may retry it under the same idempotency key or offsets.
func (h logHooks) Unknown(w *wal.Write[logJoin], err error) {
	l, u := h.l, w.Unit.u
	e := l.e
	if u == nil {
		// The log answers unknown only the units of a failed batch (its
		// records are queued again): a record's entry has no unit.
		e.broken("an entry answered unknown is a held unit's: record %t, error %v", !w.IsUnit(), err)
		return
	}
	if u.seq != 0 || u.seg != nil {
		// No sequence number was spent on a failed batch: a unit answered
		// unknown after it was acked would be answered twice.
		e.broken("a unit of a failed batch was never made durable: partition %d, sequence %d, segment %t", u.part, u.seq, u.seg != nil)
		return
	}
	l.queuedBytes -= u.bytes
	l.inFlight--
	if l.queuedBytes < 0 || l.inFlight < 0 {
		e.broken("queued bytes and units in flight ≥ 0: %d bytes, %d units after unit of partition %d answered unknown", l.queuedBytes, l.inFlight, u.part)
		return
	}
	if len(u.dones) == 0 && e.state != stateFailed || u.replayed || err == nil {
		// Its submitters learn the outcome here, once: a unit nobody
		// waits for was answered already — by failAll alone, when the
		// engine stopped with its batch in flight.
		e.broken("a unit of a failed batch is answered once, with the failure, to its waiting submitters: partition %d, %d waiting, replayed %t, error %v",
			u.part, len(u.dones), u.replayed, err)
		return
	}
	e.answerUnheld(u, fmt.Errorf("%w: %v", ErrUnknownOutcome, err))
	releaseUnit(w.Unit.in)
	l.checkFlight(false)
	e.checkHeld()
	if e.cutDue && e.live.empty() {
		e.maybeSeal() // its WAL slot is free: a cut-only segment may take it (cutOnlyDue)
	}
}

func (h logHooks) Poisoned(seg *wal.Segment, err error) {
	e := h.l.e
	if seg == nil || err == nil {
		e.broken("a poisoned segment comes with the error that poisoned it: segment %t, error %v", seg != nil, err)
		return
	}
	e.mark(MarkWALPoisoned)
	h.l.lastError = fmt.Errorf("WAL segment %s poisoned: %w", seg.Path, err)
}

func (h logHooks) OpenFailed(part uint32, err error) {
	e := h.l.e
	if int(part) >= h.l.cfg.Partitions || err == nil {
		e.broken("a failed segment creation is one of the log's partitions', with its error: partition %d of %d, error %v", part, h.l.cfg.Partitions, err)
		return
	}
	e.mark(MarkWALOpenRetry)
	h.l.lastError = fmt.Errorf("WAL partition %d: %w", part, err)
	e.failing(troubleWAL(part), fmt.Errorf("open a new log segment: %w", err))
}

// Opened clears the trouble of a partition of the log (OpenFailed's).
func (h logHooks) Opened(part uint32) {
	if int(part) >= h.l.cfg.Partitions {
		h.l.e.broken("a created segment is one of the log's partitions': partition %d of %d", part, h.l.cfg.Partitions)
		return
	}
	h.l.e.succeeded(troubleWAL(part))
}

// Backoff: the log numbers its retries from 1 (a creation's failures so
// far, or AttemptsMax for a removal); Engine.backoff shifts by it.
func (h logHooks) Backoff(attempt int) time.Duration {
	if attempt < 1 {
		h.l.e.broken("a log retry's attempt number is ≥ 1: %d", attempt)
		return h.l.e.cfg.RetryMax
	}
	return h.l.e.backoff(attempt)
}

func (h logHooks) Broken(format string, args ...any) { h.l.e.broken(format, args...) }
func (h logHooks) Stopped() bool                     { return h.l.e.state == stateFailed }
func (h logHooks) Now() time.Duration                { return h.l.e.now() }
