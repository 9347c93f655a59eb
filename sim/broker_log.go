package sim

import (
	"time"
)

// brokerLog is the broker behind one broker source with a BrokerSpec,
// and what the source knows of it (broker_fetch.go). It lives as long
// as the world: crashes of the engine do not touch it.
//
// The log of a partition is as long as the source has read: a record
// is appended when a fetch first reaches it, as if its producer kept
// just ahead of the consumer (so a healthy consumer never falls behind,
// however fast the source's Interval). Retention removes, at every
// check, the records first read RetentionAge ago or longer — only a
// source that must read them again (after a crash, a refusal, while it
// waits for replayed units or for an outage to end) can meet their
// absence. A partition's start (the first record retention kept) only
// rises.
type brokerLog struct {
	s    *source
	spec *BrokerSpec
	rand *Rand
	// Per partition: whether the topic has it yet, and from which step
	// of the fault phase (0: the start).
	exists  []bool
	addedAt []int // permille of the fault phase; -1: from the start
	start   []uint64
	end     []uint64   // the last record appended
	reads   [][]readAt // when records were appended, oldest first
	removed []int      // reads[p][:removed[p]] are past the start
	outages []outage

	// The source's side, for its current run: the partitions it
	// consumes, whether it stopped on a gap, its fetches that failed in
	// an outage (and the backoff before the next), the resume's.
	known      []bool
	found      []bool // an added partition was begun, by a resume or the watch (counted once)
	watched    int    // partitions the metadata watch found
	stopped    bool
	failed     []bool
	backoff    []time.Duration
	resumeWait time.Duration

	// What the source reported to the world, and where it started
	// partitions it held no offset of (broker_oracle.go).
	gaps   []brokerGap
	starts []brokerStart
}

// readAt: the records up to last were appended at at.
type readAt struct {
	last uint64
	at   time.Duration
}

// outage is a BrokerOutage once begun: from begun until until.
type outage struct {
	spec  BrokerOutage
	begun bool
	until time.Duration
}

// brokerGap is a range of a partition's records, from up to (not
// including) to, that the source reported lost to retention; skipped:
// it went on from to (on_gap skip), else it stopped.
type brokerGap struct {
	p        int
	from, to uint64
	skipped  bool
	resume   bool // met when resuming, not by a fetch
	at       time.Duration
}

// brokerStart: the source began partition p at record at, the log's
// start, without an offset of it (the Kafka source's Start earliest).
type brokerStart struct {
	p  int
	at uint64
}

// World marks of a broker's retention, partitions and outages.
const (
	MarkBrokerGapStopped    = "broker-gap-stopped"     // the source met records retention removed and stopped (on_gap stop)
	MarkBrokerGapSkipped    = "broker-gap-skipped"     // … and skipped them, reporting the range (on_gap skip)
	MarkBrokerGapAtFetch    = "broker-gap-at-fetch"    // a gap met by a fetch in a run, not by a resume
	MarkBrokerStartRemoved  = "broker-start-removed"   // a partition without an offset begun at a start retention moved
	MarkBrokerPartitionAdd  = "broker-partition-added" // a partition added to the topic begun from its start (found by the metadata watch or a resume)
	MarkBrokerOutageRetried = "broker-outage-retried"  // a fetch (or a resume) that failed in an outage retried until it went through
)

// Outage backoff of a broker source: the Kafka source's retry bounds.
const (
	brokerRetryBase = 25 * time.Millisecond
	brokerRetryMax  = time.Second
)

func newBrokerLog(s *source) *brokerLog {
	spec := s.spec.Broker
	n := s.spec.Partitions
	b := &brokerLog{s: s, spec: spec, rand: s.w.root.Split("broker/" + s.spec.Name),
		exists: make([]bool, n), addedAt: make([]int, n), start: make([]uint64, n), end: make([]uint64, n),
		reads: make([][]readAt, n), removed: make([]int, n),
		known: make([]bool, n), found: make([]bool, n), failed: make([]bool, n), backoff: make([]time.Duration, n)}
	first := n - len(spec.AddedPermille)
	for p := range n {
		b.start[p] = 1
		b.addedAt[p] = -1
		if p >= first {
			b.addedAt[p] = spec.AddedPermille[p-first]
		}
		b.exists[p] = b.addedAt[p] < 0
		s.next[p] = 1 // a partition not consumed yet has read nothing
	}
	for _, o := range spec.Outages {
		b.outages = append(b.outages, outage{spec: o})
	}
	if spec.RetentionAge > 0 {
		b.retainLater()
	}
	return b
}

// brokersDue adds the partitions and begins the outages whose step has
// come (each step, startDueSources).
func (w *World) brokersDue() {
	steps, healAt := w.sched.Steps(), w.first().healAt
	for _, s := range w.sources {
		b := s.brk
		if b == nil {
			continue
		}
		for p, at := range b.addedAt {
			if !b.exists[p] && steps >= healAt*uint64(at)/1000 {
				b.exists[p] = true
			}
		}
		for i := range b.outages {
			o := &b.outages[i]
			if !o.begun && w.producing && steps >= healAt*uint64(o.spec.StartPermille)/1000 {
				o.begun, o.until = true, w.sched.Now()+o.spec.Length
			}
		}
	}
}

// down reports whether the broker answers nothing now: an outage has
// begun and not ended, and the fault phase has not (outages end with it).
func (b *brokerLog) down() bool {
	if !b.s.w.producing {
		return false
	}
	now := b.s.w.sched.Now()
	for _, o := range b.outages {
		if o.begun && now < o.until {
			return true
		}
	}
	return false
}

// appended notes that partition p's records up to last exist now (the
// fetch that first reached them).
func (b *brokerLog) appended(p int, last uint64) {
	if last > b.end[p] {
		b.end[p] = last
		b.reads[p] = append(b.reads[p], readAt{last: last, at: b.s.w.sched.Now()})
	}
}

// retainLater schedules the next retention check, during the fault
// phase only.
func (b *brokerLog) retainLater() {
	b.s.w.sched.After(b.rand.Duration(b.spec.RetentionCheck/2, b.spec.RetentionCheck*3/2), func() {
		if !b.s.w.producing {
			return
		}
		b.retain()
		b.retainLater()
	})
}

// retain removes every partition's records appended RetentionAge ago or
// longer.
func (b *brokerLog) retain() {
	cutoff := b.s.w.sched.Now() - b.spec.RetentionAge
	for p := range b.reads {
		r := b.reads[p]
		for b.removed[p] < len(r) && r[b.removed[p]].at <= cutoff {
			b.start[p] = max(b.start[p], r[b.removed[p]].last+1)
			b.removed[p]++
		}
	}
}

// retryIn is the wait before partition p's next fetch after one failed
// in an outage: doubling from brokerRetryBase up to brokerRetryMax,
// jittered.
func (b *brokerLog) retryIn(p int) time.Duration {
	b.backoff[p] = min(max(2*b.backoff[p], brokerRetryBase), brokerRetryMax)
	return b.rand.Duration(b.backoff[p]/2, b.backoff[p])
}

// begin notes that the source begins partition p from its start: an
// added one is counted (once).
func (b *brokerLog) begin(p int) {
	if b.addedAt[p] >= 0 && !b.found[p] {
		b.found[p] = true
		b.s.w.mark(MarkBrokerPartitionAdd)
	}
}
