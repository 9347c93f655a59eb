package sim

import (
	"errors"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// source is a simulated source's runtime state. It lives outside the
// engine, so it survives crashes: a unit in flight when the engine dies is
// simply never answered. gen changes at every crash and every recovery, so
// an answer meant for an older generation is ignored.
type source struct {
	w    *World
	idx  int
	spec SourceSpec
	rand *Rand
	gen  uint64
	// startStep: the source produces from this step on (a bulk load that
	// begins mid-run); started once it has.
	startStep uint64
	started   bool
	// Replayable: per partition, the next sequence number to submit.
	next     []uint64
	inFlight []bool
	highest  []uint64 // highest sequence number ever submitted
	// recovered: the highest offset a recovery reported, the units up to
	// which the engine acknowledged by its offsets (tablecheck.go).
	recovered []uint64
	attempt   []uint64 // per partition, counts submissions; a timeout resends only its own
	// Non-replayable: sequence numbers to (re)submit, and how many slots
	// are busy.
	retry   []uint64
	newSeq  uint64
	busy    int
	pending map[uint64]bool // in flight now
	// firstSent: when each unanswered unit was first sent. A client
	// retries a key for half the idempotency window at most (giveUp):
	// past the window a retry is a new unit, stored again.
	firstSent map[uint64]time.Duration
	// endpoint: the real HTTP source the units go through (Config.HTTP),
	// nil to submit them to the engine directly.
	endpoint HTTPEndpoint
	// refused: units whose invalid first request the endpoint judged.
	refused map[uint64]bool
	// A prefix source (prefix.go): its current run, the objects it
	// dropped (newSeq of them; by offset key in objKeys), how many of
	// them cannot be ingested, and how far every object is known done.
	run       *prefixRun
	objects   []*objectLayout
	objKeys   map[string]int
	corrupt   int
	ackedUpTo uint64
	floorUpTo int // prefix, order keys: objects up to here are checked under a floor (floorSound)
	// brk: the broker of a broker source with a BrokerSpec (broker_log.go).
	brk *brokerLog
	// codec: a broker source's real record logic (broker_codec.go), nil
	// for the world's model of it.
	codec BrokerCodec
	// mqtt: an MQTT source's real message logic (mqtt_codec.go).
	mqtt MessageCodec
}

func newSource(w *World, idx int, spec SourceSpec) *source {
	s := &source{w: w, idx: idx, spec: spec, rand: w.root.Split("source/" + spec.Name), pending: map[uint64]bool{}, refused: map[uint64]bool{},
		objKeys: map[string]int{}, firstSent: map[uint64]time.Duration{}}
	if !spec.Replayable && w.cfg.HTTP != nil && (spec.Codec != CodecMQTT || w.cfg.MQTT == nil) {
		s.endpoint = w.cfg.HTTP(HTTPOptions{Sink: spec.sinkRef(), Ready: func() bool { return w.eng != nil && w.eng.Ready() }, BodyCap: spec.BodyCap})
	}
	s.startStep = w.healAt * uint64(spec.StartPermille) / 1000
	// A prefix source starts at a step (startDueSources), where its
	// producer's first drop is scheduled.
	s.started = s.startStep == 0 && !spec.Prefix
	if spec.Replayable {
		s.next = make([]uint64, spec.Partitions)
		s.inFlight = make([]bool, spec.Partitions)
		s.highest = make([]uint64, spec.Partitions)
		s.recovered = make([]uint64, spec.Partitions)
		s.attempt = make([]uint64, spec.Partitions)
	}
	if spec.Broker != nil && s.broker() {
		s.brk = newBrokerLog(s)
	}
	s.codec, s.mqtt = s.newCodec(), s.newMQTT()
	return s
}

// startDueSources starts the sources whose start step has come.
func (w *World) startDueSources() {
	w.brokersDue()
	for _, s := range w.sources {
		if !s.started && w.sched.Steps() >= s.startStep && w.producing {
			s.started = true
			switch {
			case s.spec.Prefix && w.cfg.Prefix != nil:
				s.drop() // the producer drops objects whether or not the engine runs
				if w.eng != nil && w.eng.Ready() {
					s.startPrefix(w.eng.Offsets())
				}
			case s.spec.Prefix:
			case w.eng != nil && w.eng.Ready():
				s.resume()
			}
		}
	}
}

// onCrash forgets everything in flight: no answer will come.
func (s *source) onCrash() {
	s.gen++
	s.stopPrefix()
	for p := range s.inFlight {
		s.inFlight[p] = false
	}
	for seq := range s.pending {
		s.retry = append(s.retry, seq)
	}
	slices.Sort(s.retry)
	clear(s.pending)
	s.busy = 0
}

// onReady resumes: replayable partitions from the recovered offsets — or,
// when the fault plan rewinds one, from earlier ones, as a consumer that
// restarts from an older commit does — and the non-replayable source with
// its unanswered units first.
func (s *source) onReady(offset func(key string) (uint64, bool)) {
	s.gen++
	if s.spec.Prefix {
		if s.started && s.w.cfg.Prefix != nil {
			s.startPrefix(s.w.eng.Offsets())
		}
		return
	}
	if s.broker() {
		s.resumeBroker()
		return
	}
	for p := range s.next {
		v, _ := offset(offsetKey(s.spec, p))
		s.next[p] = v + 1
		s.recovered[p] = max(s.recovered[p], v)
		if n, ok := s.w.faults.Rewind(); ok {
			s.next[p] = max(s.next[p], n+1) - n
		}
	}
	if s.started {
		s.resume()
	}
}

// resume schedules every partition or slot of a started source.
func (s *source) resume() {
	if s.spec.Replayable {
		for p := range s.next {
			s.schedule(p, s.rand.Duration(0, s.spec.Interval))
		}
		return
	}
	for range s.spec.InFlight {
		s.scheduleSlot(s.rand.Duration(0, s.spec.Interval))
	}
}

func (s *source) schedule(p int, d time.Duration) {
	gen := s.gen
	s.w.sched.After(d, func() {
		if gen == s.gen {
			s.tickPartition(p)
		}
	})
}

// exhausted reports whether seq is past what the source will deliver:
// its quota, or — once the fault phase is over — anything it never
// started. Units it started (and may not have heard back about) it still
// delivers, so that the run converges on a definite set.
func (s *source) exhausted(seq, highest uint64) bool {
	return (s.spec.Units > 0 && seq > s.spec.Units) || (!s.w.producing && seq > highest)
}

// tickPartition submits the partition's next unit.
func (s *source) tickPartition(p int) {
	if s.brk != nil && !s.brokerFetch(p) {
		return
	}
	seq := s.next[p]
	if s.inFlight[p] || s.exhausted(seq, s.highest[p]) {
		return
	}
	last := seq
	if s.broker() {
		last = s.fetchEnd(p, seq)
	}
	s.highest[p] = max(s.highest[p], last)
	s.inFlight[p] = true
	s.attempt[p]++
	if s.broker() {
		s.sendRecords(p, seq, last)
		return
	}
	s.sendPartition(p, seq)
}

// sendPartition submits partition p's unit seq, and again after every
// timeout until an answer comes; the first answer counts.
func (s *source) sendPartition(p int, seq uint64) {
	uid := makeUID(s.idx, p, seq)
	in := s.unit(uid)
	in.Offsets = segment.Offsets{{Key: offsetKey(s.spec, p), Value: seq}}
	gen, attempt := s.gen, s.attempt[p]
	waiting := func() bool { return gen == s.gen && s.inFlight[p] && s.attempt[p] == attempt }
	s.afterTimeout(func() {
		if waiting() {
			s.sendPartition(p, seq)
		}
	})
	s.w.submit(uid, in, func(err error) {
		if !waiting() {
			return
		}
		s.inFlight[p] = false
		if err != nil {
			s.w.sourceError(s, uid, err)
			s.schedule(p, s.backoff(err))
			return
		}
		s.next[p] = seq + 1
		s.schedule(p, s.rand.Exp(s.spec.Interval))
	})
}

func (s *source) scheduleSlot(d time.Duration) {
	gen := s.gen
	s.w.sched.After(d, func() {
		if gen == s.gen {
			s.tickSlot()
		}
	})
}

// tickSlot submits the non-replayable source's next unit: an unanswered
// one first, with its original idempotency key.
func (s *source) tickSlot() {
	if s.busy >= s.spec.InFlight {
		return
	}
	var seq uint64
	switch {
	case len(s.retry) > 0:
		seq, s.retry = s.retry[0], s.retry[1:]
		if s.mqtt != nil {
			s.w.mark(MarkMQTTRedelivered)
		}
	case !s.exhausted(s.newSeq+1, s.newSeq):
		s.newSeq++
		seq = s.newSeq
		s.firstSent[seq] = s.w.sched.Now()
	default:
		return
	}
	s.busy++
	s.pending[seq] = true
	s.sendSlot(seq)
}

// sendSlot submits the non-replayable unit seq with its idempotency key,
// and again after every timeout until an answer comes.
func (s *source) sendSlot(seq uint64) {
	uid := makeUID(s.idx, 0, seq)
	in, ok := s.slotUnit(uid)
	if !ok {
		return
	}
	if s.giveUp(seq) {
		return
	}
	gen := s.gen
	waiting := func() bool { return gen == s.gen && s.pending[seq] }
	s.afterTimeout(func() {
		if waiting() {
			s.sendSlot(seq)
		}
	})
	send := s.w.submit
	if s.endpoint != nil {
		send = func(uid UID, in engine.Unit, done func(error)) { s.w.request(s, uid, in, done) }
	}
	send(uid, in, func(err error) {
		if !waiting() {
			return
		}
		s.busy--
		delete(s.pending, seq)
		if err != nil {
			s.w.sourceError(s, uid, err)
			s.retry = append([]uint64{seq}, s.retry...)
			s.scheduleSlot(s.backoff(err))
			return
		}
		delete(s.firstSent, seq)
		s.scheduleSlot(s.rand.Exp(s.spec.Interval))
	})
}

// giveUp stops sending unit seq, unanswered, once half the idempotency
// window has passed since it was first sent, as the engine's contract
// asks of a client (engine.Config.IdempotencyWindow: a key is remembered
// for the window after its unit was submitted; a retry later than that
// is a new unit). Half: a retry sent just within the window may reach
// the engine's lookup past it. Whether the unit was stored once or not
// at all, the oracle's checks hold; it is never stored twice.
func (s *source) giveUp(seq uint64) bool {
	first, ok := s.firstSent[seq]
	if !ok {
		s.w.oracle.fail("source %s: unit %d sent with no first send recorded", s.spec.Name, seq)
		return false
	}
	if s.w.sched.Now()-first <= s.w.engCfg.IdempotencyWindow/2 {
		return false
	}
	s.w.mark(MarkIdemRetryGivenUp)
	s.w.oracle.givenUp[makeUID(s.idx, 0, seq)] = true
	s.busy--
	delete(s.pending, seq)
	delete(s.firstSent, seq)
	s.scheduleSlot(0)
	return true
}

// slotUnit is the non-replayable unit uid with its idempotency key: the
// world's, or the MQTT source's (mqtt_codec.go).
func (s *source) slotUnit(uid UID) (engine.Unit, bool) {
	if s.mqtt != nil {
		return s.mqttUnit(uid)
	}
	in := s.unit(uid)
	in.IdempotencyKey = idemKey(s.spec.Name, uid)
	return in, true
}

// afterTimeout runs fn when the source's client timeout expires (never
// without one).
func (s *source) afterTimeout(fn func()) {
	if s.spec.Timeout > 0 {
		s.w.sched.After(s.spec.Timeout, fn)
	}
}

// backoff is the wait before a unit answered err is sent again. A
// refusal that says "later" (not ready, backpressure) is waited out like
// a Retry-After; only other failures get the source's own backoff.
func (s *source) backoff(err error) time.Duration {
	later := errors.Is(err, engine.ErrNotReady) || errors.Is(err, engine.ErrResourceExhausted) || errors.Is(err, errRefused)
	if b := s.spec.Backoff; b > 0 && !later {
		return s.rand.Duration(b/16, b)
	}
	return s.rand.Duration(20*time.Millisecond, 300*time.Millisecond)
}

// unit builds the unit's content: a pure function of its id.
func (s *source) unit(uid UID) engine.Unit {
	batch, sidecar := unitContent(s.spec, uid)
	in := engine.Unit{
		Key:     segment.PartitionKey{SinkRef: s.spec.sinkRef(), Namespace: s.spec.Name, Partition: "0", Schema: fingerprintOf(batch.Schema())},
		Schema:  batch.Schema(),
		Batches: []arrow.RecordBatch{batch},
		Sidecar: sidecar,
	}
	s.w.oracle.produced(uid, batch, in.Sidecar)
	return in
}

// unitContent is unit uid's batch — with its optional fields (shape.go)
// — and, for a CDC source, its changes.
func unitContent(spec SourceSpec, uid UID) (arrow.RecordBatch, *segment.Sidecar) {
	if spec.Prefix && spec.Formats != "" {
		return pieceContent(spec, uid), nil
	}
	rows := unitRows(spec, uid)
	batch := withShape(unitBatch(spec, uid, rows), uid, shapeOf(spec, uid))
	if !spec.CDC {
		return batch, nil
	}
	return batch, cdcSidecar(spec, uid, rows)
}

// idle reports whether the source has nothing left to do: nothing in
// flight, nothing to retry, and no partition short of what it delivers
// (a rewound partition walks back up to its highest unit).
func (s *source) idle() bool {
	if s.spec.Prefix {
		return s.w.cfg.Prefix == nil || s.prefixIdle()
	}
	if s.brk != nil {
		return s.brokerIdle()
	}
	for p, f := range s.inFlight {
		if f || s.started && !s.exhausted(s.next[p], s.highest[p]) {
			return false
		}
	}
	return s.busy == 0 && len(s.retry) == 0
}

// expectedErr reports errors a source is built to see and retry: the
// disk WAL's outcome-unknown (a failed write or fsync) is retried with
// the same idempotency key or offsets, like a lost answer; a halted WAL
// partition refuses until the run ends (it ends on the halt's alert).
func expectedErr(err error) bool {
	return errors.Is(err, engine.ErrResourceExhausted) || errors.Is(err, engine.ErrNotReady) || errors.Is(err, engine.ErrClosed) ||
		errors.Is(err, errRefused) ||
		errors.Is(err, engine.ErrUnknownOutcome) || errors.Is(err, engine.ErrPartitionHalted)
}
