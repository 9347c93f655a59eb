package sim

import (
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// A broker source (SourceSpec.FetchMax > 0) is a partitioned log read as
// the Kafka source reads one (sources/kafka): each partition holds
// records — record seq of partition p is unit id makeUID(idx, p, seq),
// its rows unitContent's — and a unit is whatever a fetch returned, a
// run of 1..FetchMax records of one partition drawn anew for every unit,
// with the partition's offset at its last record. Units are not the same
// when the source reads its log again after a restart, so unlike a log
// source (one record a unit) a retry of a committed unit cannot join
// it: the source must resume exactly where the WAL's offsets say. On a
// disk WAL those include the units recovery replayed from the log only
// once their generation commits (engine.ReplayPending), so the source
// waits for that first, as the daemon does (storage.Host.ResumeOffsets).
//
// In some worlds the broker does more (SourceSpec.Broker, broker_log.go
// and broker_fetch.go): retention removes a partition's oldest records,
// and a source that resumes or fetches below a partition's start
// reports the gap — partition and range — and stops (on_gap stop) or
// goes on from the start (skip), never jumping silently; partitions
// are added while the world runs, found by the source's metadata watch
// and read from their start; outages fail every fetch, retried with a
// backoff. broker_oracle.go checks that every record up to a
// partition's committed offset is committed once, or inside a gap the
// source reported of records retention removed.

// World marks of broker sources.
const (
	MarkBrokerResumeWaited = "broker-resume-waited" // a restart waited for replayed units to commit before resuming
	MarkBrokerMultiRecord  = "broker-multi-record"  // a unit of several records acked
)

// brokerResumePoll is how often a broker source asks whether the
// replayed units have committed (the daemon's resumePoll).
const brokerResumePoll = 10 * time.Millisecond

// broker reports whether s reads a partitioned log a fetch at a time.
func (s *source) broker() bool { return s.spec.FetchMax > 0 }

// resumeBroker sets each partition's next record from the recovered
// offsets once no replayed unit is pending, then resumes. A broker
// source never rewinds: the Kafka source resumes from the WAL's offsets
// only, and a unit cut at other boundaries than a committed one could
// straddle it.
func (s *source) resumeBroker() {
	w, gen := s.w, s.gen
	if w.eng.ReplayPending() > 0 {
		w.mark(MarkBrokerResumeWaited)
		w.sched.After(brokerResumePoll, func() {
			if gen == s.gen && w.eng != nil && w.eng.Ready() {
				s.resumeBroker()
			}
		})
		return
	}
	if s.brk != nil {
		s.resumeFromBroker()
		return
	}
	for p := range s.next {
		next, ok := s.recoveredNext(p)
		s.next[p] = next
		s.recovered[p] = max(s.recovered[p], next-1)
		if ok && s.codec != nil {
			s.codecResume(p, 1, s.highest[p], true) // a log nothing is removed from
		}
	}
	if s.started {
		s.resume()
	}
}

// fetchEnd is the last record of partition p's unit starting at seq:
// up to FetchMax records, none past what the source delivers.
func (s *source) fetchEnd(p int, seq uint64) uint64 {
	n := 1 + uint64(s.rand.Intn(s.spec.FetchMax))
	last := seq
	for last+1 < seq+n && !s.exhausted(last+1, s.highest[p]) {
		last++
	}
	if s.brk != nil {
		s.brk.appended(p, last)
	}
	return last
}

// fetched is the unit of partition p's records first..last, and the last
// record it holds: the codec's (broker_codec.go), or the world's units
// of those records together.
func (s *source) fetched(p int, first, last uint64) (engine.Unit, uint64, bool) {
	if s.codec != nil {
		return s.codecUnit(p, first, last)
	}
	in := engine.Unit{}
	for seq := first; seq <= last; seq++ {
		u := s.unit(makeUID(s.idx, p, seq))
		if seq == first {
			in.Key, in.Schema = u.Key, u.Schema
		}
		in.Batches = append(in.Batches, u.Batches...)
	}
	in.Offsets = segment.Offsets{{Key: offsetKey(s.spec, p), Value: last}}
	return in, last, true
}

// sendRecords submits partition p's records first..last as one unit,
// and the same unit again after every timeout until an answer comes.
func (s *source) sendRecords(p int, first, last uint64) {
	in, last, ok := s.fetched(p, first, last)
	if !ok {
		return
	}
	uids := make([]UID, 0, last-first+1)
	for seq := first; seq <= last; seq++ {
		uids = append(uids, makeUID(s.idx, p, seq))
	}
	gen, attempt := s.gen, s.attempt[p]
	waiting := func() bool { return gen == s.gen && s.inFlight[p] && s.attempt[p] == attempt }
	s.afterTimeout(func() {
		if waiting() {
			s.sendRecords(p, first, last)
		}
	})
	s.w.submitRecords(uids, in, func(err error) {
		if !waiting() {
			return
		}
		s.inFlight[p] = false
		if err != nil {
			s.w.sourceError(s, uids[0], err)
			s.schedule(p, s.backoff(err))
			return
		}
		if len(uids) > 1 {
			s.w.mark(MarkBrokerMultiRecord)
		}
		s.next[p] = last + 1
		// Records arrive one per Interval on average, as a log source's
		// units do: a fetch of k records waits k Intervals for the next.
		s.schedule(p, s.rand.Exp(s.spec.Interval*time.Duration(len(uids))))
	})
}
