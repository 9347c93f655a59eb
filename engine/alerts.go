package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// AlertKind says what an alert is about: a condition an operator must
// look at. The kinds are few and fixed so that a metric can count them.
type AlertKind uint8

const (
	// AlertCorruption: something the WAL owns failed its checks on every
	// read (ErrCorrupt): a marker, a checkpoint, a key run, a body.
	AlertCorruption AlertKind = iota + 1
	// AlertBitmapUnreadable: a segment's completion bitmap cannot be read
	// at recovery; the segment is kept, never deleted.
	AlertBitmapUnreadable
	// AlertWALHalted: a local-disk WAL partition stopped at corruption;
	// entries before it are still used.
	AlertWALHalted
	// AlertCannotApply: a sink refused a job for good (ErrCannotApply,
	// or no such sink); its lane stops and its segment is kept.
	AlertCannotApply
	// AlertFenced: a newer writer claimed the pipeline (ErrFenced); the
	// engine failed closed.
	AlertFenced
	// AlertInvariant: one of the engine's invariants broke (ErrInvariant,
	// a bug); the engine failed closed.
	AlertInvariant
	// AlertFailedClosed: the engine failed closed for another reason
	// (an encode error, a commit it could not settle, recovery).
	AlertFailedClosed
	// AlertIDCollision: a sink found a job's id already applied with
	// another job's content (ErrIDCollision: two logs made one id); the
	// job is refused, its lane stops and its segment is kept.
	AlertIDCollision

	alertKindCount = iota + 1 // AlertKindsByIndex's length (index 0 unused)
)

// AlertsMax bounds the alert queue. An alert is rare (most fail the
// engine closed, which raises one), so 256 holds hours of a flapping
// sink's refusals between two drains a second apart; beyond it the
// oldest are dropped and AlertsSince counts them.
const AlertsMax = 256

var alertKindNames = [alertKindCount]string{
	AlertCorruption:       "corruption",
	AlertBitmapUnreadable: "bitmap-unreadable",
	AlertWALHalted:        "wal-partition-halted",
	AlertCannotApply:      "cannot-apply",
	AlertFenced:           "fenced",
	AlertInvariant:        "invariant",
	AlertFailedClosed:     "failed-closed",
	AlertIDCollision:      "id-collision",
}

// AlertKinds lists every kind, in order (for metrics that export a
// zero for kinds never raised).
func AlertKinds() []AlertKind {
	kinds := make([]AlertKind, 0, alertKindCount-1)
	for k := AlertCorruption; k < alertKindCount; k++ {
		kinds = append(kinds, k)
	}
	return kinds
}

func (k AlertKind) String() string {
	if k == 0 || int(k) >= alertKindCount {
		return fmt.Sprintf("alert-kind-%d", uint8(k))
	}
	return alertKindNames[k]
}

// AlertCounts are the alerts raised per kind, indexed by AlertKind.
type AlertCounts [alertKindCount]uint64

// Alert is one event of the alert queue.
type Alert struct {
	Seq         uint64 // 1 for the engine's first alert, then +1 each
	Kind        AlertKind
	Err         error         // the reason; never nil
	AtMonotonic time.Duration // Clock.Monotonic when it was raised
}

// alert raises an alert of kind for err: counted, queued (dropping the
// oldest beyond AlertsMax). It decides nothing.
//
// REQUIRES: err names the reason (not nil); kind is a known kind.
func (e *Engine) alert(kind AlertKind, err error) {
	if err == nil || kind == 0 || int(kind) >= alertKindCount {
		panic(fmt.Sprintf("engine: alert of kind %d with reason %v", kind, err))
	}
	e.stats.Alerts++
	e.stats.AlertsByKind[kind]++
	if len(e.alerts) == AlertsMax {
		e.alerts = slices.Delete(e.alerts, 0, 1)
	}
	e.alerts = append(e.alerts, Alert{Seq: e.stats.Alerts, Kind: kind, Err: err, AtMonotonic: e.now()})
	if len(e.alerts) > AlertsMax {
		// Failing closed raises one more alert: failClosed runs once, so
		// this check does not recur.
		e.broken("the alert queue holds at most AlertsMax: %d alerts queued, limit %d", len(e.alerts), AlertsMax)
	}
	// AlertsSince finds an alert by its Seq's distance from the newest:
	// the queue holds the newest alerts, numbered one by one.
	if n := len(e.alerts); uint64(n) > e.stats.Alerts || n > 1 && e.alerts[n-2].Seq != e.stats.Alerts-1 {
		e.broken("alerts queued numbered one by one, newest last: alert %d (%s) queued after alert %d, %d queued",
			e.stats.Alerts, kind, e.alerts[max(n-2, 0)].Seq, n)
	}
}

// alertKindOf classifies an error by its sentinel: fenced, invariant and
// corruption are named by the error itself; otherwise fallback.
func alertKindOf(err error, fallback AlertKind) AlertKind {
	switch {
	case errors.Is(err, ErrFenced):
		return AlertFenced
	case errors.Is(err, ErrInvariant):
		return AlertInvariant
	case errors.Is(err, ErrCorrupt):
		return AlertCorruption
	case errors.Is(err, ErrIDCollision):
		return AlertIDCollision
	}
	return fallback
}

// AlertsSince returns the queued alerts after seq, oldest first (pass 0
// first, then the last Seq seen), and how many alerts after seq were
// dropped from the queue before this call could see them. The slice is
// the caller's.
func (e *Engine) AlertsSince(seq uint64) (alerts []Alert, dropped uint64) {
	total := e.stats.Alerts
	if seq >= total {
		return nil, 0
	}
	first := total - uint64(len(e.alerts)) + 1 // the Seq of e.alerts[0]
	if seq+1 < first {
		dropped = first - (seq + 1)
		seq = first - 1
	}
	return slices.Clone(e.alerts[seq+1-first:]), dropped
}

// LastAlert returns the reason of the most recent alert, or nil.
func (e *Engine) LastAlert() error {
	if len(e.alerts) == 0 {
		return nil
	}
	return e.alerts[len(e.alerts)-1].Err
}
