package sim

// The source's side of a broker with a BrokerSpec (broker_log.go), as
// the Kafka source (sources/kafka) behaves:
//
//   - a resume lists the topic's partitions and checks each recovered
//     offset against its partition's start: below it, the records
//     between were removed before they were ingested — a gap, reported
//     with its partition and range; with on_gap stop the source stops
//     there, with skip it goes on from the start. A partition without an
//     offset begins at its start (Config.Start earliest), as one added
//     to the topic does when the metadata watch finds it;
//   - a fetch that finds its partition's next record removed is a gap
//     too, handled the same way;
//   - in an outage every fetch, listing and lookup fails, and is retried
//     after a backoff (the franz-go client retries fetches itself; the
//     source retries listing the topics).
//
// Never a silent jump: every record up to a partition's committed
// offset is committed, or inside a reported gap (broker_oracle.go).

// brokerFetch reports whether tickPartition may go on with partition p
// now: not once the source stopped on a gap, not for a partition it
// does not consume, not in an outage (the fetch fails and is retried).
// A fetch that finds p's next record removed reports the gap first.
func (s *source) brokerFetch(p int) bool {
	b := s.brk
	switch {
	case b.stopped || !b.known[p]:
		return false
	case s.inFlight[p] || s.exhausted(s.next[p], s.highest[p]):
		return true // tickPartition fetches nothing
	case b.down():
		b.failed[p] = true
		s.schedule(p, b.retryIn(p))
		return false
	}
	if b.failed[p] {
		b.failed[p], b.backoff[p] = false, 0
		s.w.mark(MarkBrokerOutageRetried)
	}
	if s.next[p] < b.start[p] {
		return s.gap(p, false)
	}
	return true
}

// gap handles partition p's records from s.next[p] up to the log's
// start, removed before the source read them: it reports the range and,
// with on_gap skip, goes on from the start. It reports whether the
// partition goes on (false: the source stopped).
func (s *source) gap(p int, resume bool) bool {
	b := s.brk
	if s.codec != nil {
		return s.codecResume(p, b.start[p], b.end[p], resume)
	}
	g := brokerGap{p: p, from: s.next[p], to: b.start[p], skipped: b.spec.OnGapSkip, resume: resume, at: s.w.sched.Now()}
	if !s.reportGap(g) {
		return false
	}
	s.next[p] = g.to
	return true
}

// reportGap tells the world (the operator's log, or the error Run
// returns) of a gap; with on_gap stop the source stops. It reports
// whether the source goes on.
func (s *source) reportGap(g brokerGap) bool {
	s.w.brokerGapReported(s, g)
	if !g.resume {
		s.w.mark(MarkBrokerGapAtFetch)
	}
	if !g.skipped {
		s.brk.stopped = true
		s.w.mark(MarkBrokerGapStopped)
		return false
	}
	s.w.mark(MarkBrokerGapSkipped)
	return true
}

// resumeFromBroker is resumeBroker for a source with a BrokerSpec, once
// no replayed unit is pending: in an outage it tries again after a
// backoff; then it consumes every partition the topic has, each from
// its recovered offset (a gap below the log's start) or, without one,
// from the start, and watches the topic for partitions added.
func (s *source) resumeFromBroker() {
	b, w, gen := s.brk, s.w, s.gen
	if b.down() {
		b.resumeWait = min(max(2*b.resumeWait, brokerRetryBase), brokerRetryMax)
		w.sched.After(b.rand.Duration(b.resumeWait/2, b.resumeWait), func() {
			if gen == s.gen && w.eng != nil && w.eng.Ready() {
				s.resumeBroker()
			}
		})
		return
	}
	if b.resumeWait > 0 {
		b.resumeWait = 0
		w.mark(MarkBrokerOutageRetried)
	}
	b.stopped = false
	for p := range s.next {
		b.known[p], b.failed[p], b.backoff[p] = b.exists[p], false, 0
		if !b.known[p] {
			continue
		}
		next, ok := s.recoveredNext(p)
		s.next[p] = next
		s.recovered[p] = max(s.recovered[p], next-1)
		if !ok {
			b.begin(p)
		}
		switch {
		case b.stopped:
		case ok && s.codec != nil:
			s.codecResume(p, b.start[p], b.end[p], true) // the source's Resume decides, gap or not
		case s.next[p] >= b.start[p]:
		case ok:
			s.gap(p, true) // the Kafka source's Run returns the first with on_gap stop
		default:
			b.starts = append(b.starts, brokerStart{p: p, at: b.start[p]})
			s.next[p] = b.start[p]
			w.mark(MarkBrokerStartRemoved)
		}
	}
	if len(b.spec.AddedPermille) > 0 {
		s.watchPartitions()
	}
	if s.started && !b.stopped {
		s.resume()
	}
}

// watchPartitions looks the topic up every Metadata interval and
// consumes the partitions added since, from their start — while the
// fault phase lasts, and after it until every partition it added is
// consumed.
func (s *source) watchPartitions() {
	b, w, gen := s.brk, s.w, s.gen
	w.sched.After(b.spec.Metadata, func() {
		if gen != s.gen || b.stopped {
			return
		}
		if !b.down() {
			for p := range b.known {
				if b.exists[p] && !b.known[p] {
					b.known[p] = true
					s.next[p] = b.start[p]
					b.watched++
					b.begin(p)
					if s.started {
						s.schedule(p, s.rand.Duration(0, s.spec.Interval))
					}
				}
			}
		}
		if w.producing || b.unknownPartition() {
			s.watchPartitions()
		}
	})
}

// unknownPartition reports whether the topic has a partition the
// source does not consume.
func (b *brokerLog) unknownPartition() bool {
	for p, k := range b.known {
		if b.exists[p] && !k {
			return true
		}
	}
	return false
}

// brokerIdle is idle for a source with a BrokerSpec: nothing in flight
// and — unless it stopped on a gap — every partition of the topic
// consumed, none short of what the source delivers.
func (s *source) brokerIdle() bool {
	b := s.brk
	for p, f := range s.inFlight {
		switch {
		case f:
			return false
		case b.stopped:
		case b.exists[p] && !b.known[p]:
			return false
		case s.started && !s.exhausted(s.next[p], s.highest[p]):
			return false
		}
	}
	return true
}
