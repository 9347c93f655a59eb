package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// request is one object-store request in flight.
type request struct {
	op     Op
	inc    *Incarnation
	key    string
	upload string // multipart upload id, for UploadPart and Complete
	seq    uint64
	// outcome is decided at issue and takes effect at completion.
	outcome Outcome
}

// StoreError is every error a store client delivers: the operation and
// key, wrapping the sentinel the engine branches on (errors.Is).
type StoreError struct {
	Op  Op
	Key string
	Err error
}

func (e *StoreError) Error() string {
	return "sim store " + e.Op.String() + " " + e.Key + ": " + e.Err.Error()
}
func (e *StoreError) Unwrap() error { return e.Err }

// submit issues one request. apply performs the effect against the truth
// (or computes a read) and returns the definite error it produced; deliver
// hands the final error to the engine's callback. Both run later, at
// completion; deliver only if the incarnation is still alive.
func (s *Store) submit(inc *Incarnation, op Op, key string, bytes int, apply func() error, deliver func(err error)) {
	s.submitUpload(inc, op, key, "", bytes, apply, deliver)
}

// submitUpload is submit for a request on multipart upload id (which the
// UploadGone outcome aborts).
func (s *Store) submitUpload(inc *Incarnation, op Op, key, upload string, bytes int, apply func() error, deliver func(err error)) {
	c := &s.counts[op]
	if !inc.alive {
		c.Discarded++
		return
	}
	s.reqSeq++
	req := &request{op: op, inc: inc, key: key, upload: upload, seq: s.reqSeq}
	extra := s.decide(req)
	delay := s.cfg.Latency[op].Sample(s.latRand, bytes) + extra
	if req.seq == s.skew {
		delay++
	}
	c.Issued++
	s.countIssuer(inc, op)
	s.trace.Begin(s.sched.now, KindStoreIssue).U("req", req.seq).U("inc", inc.id).U("op", uint64(op)).
		S("key", key).I("bytes", int64(bytes)).U("outcome", uint64(req.outcome)).I("delay", int64(delay)).End()
	s.sched.After(delay, func() { s.completeRequest(req, apply, deliver) })
}

// decide asks the injector for the request's fate.
func (s *Store) decide(req *request) (extra time.Duration) {
	if s.cfg.Faults == nil {
		return 0
	}
	o, extra := s.cfg.Faults.Decide(req.op, req.key, s.sched.now, s.faultRand)
	if o >= numOutcomes || extra < 0 {
		panic("sim: StoreFaults returned an invalid outcome or a negative latency")
	}
	req.outcome = o
	s.counts[req.op].Outcomes[o]++
	return extra
}

func (s *Store) countIssuer(inc *Incarnation, op Op) {
	for uint64(len(s.issuedBy)) < inc.id {
		s.issuedBy = append(s.issuedBy, [NumOps]uint64{})
	}
	s.issuedBy[inc.id-1][op]++
}

// completeRequest runs at the request's completion time: it applies the effect
// as the outcome says, then delivers.
func (s *Store) completeRequest(req *request, apply func() error, deliver func(err error)) {
	var err error
	switch req.outcome {
	case OK:
		err = s.apply(req, apply)
	case Fail:
		err = ErrInjected
	case Throttle:
		err = engine.ErrThrottled
	case AmbiguousApplied:
		s.applyAmbiguous(req, apply)
		err = engine.ErrAmbiguous
	case AmbiguousLost:
		err = engine.ErrAmbiguous
	case UploadGone:
		if u := s.activeUpload(req.key, req.upload); u != nil {
			s.finishUpload(u) // aborted by someone else just before
		}
		err = engine.ErrNoSuchUpload
	case Refused:
		err = fmt.Errorf("sim: access denied: %w", engine.ErrRefused)
	}
	if s.cfg.Response == (Latency{}) {
		s.deliver(req, deliver, err)
		return
	}
	// The response travels back after the effect: a process killed in
	// between has changed the world without hearing about it.
	s.sched.After(s.cfg.Response.Sample(s.latRand, 0), func() { s.deliver(req, deliver, err) })
}

// applyAmbiguous applies the effect now, or a little later when the store
// models requests that outlive the client's timeout.
func (s *Store) applyAmbiguous(req *request, apply func() error) {
	if s.cfg.AmbiguousLandMax == 0 {
		s.apply(req, apply)
		return
	}
	s.sched.After(s.faultRand.Duration(0, s.cfg.AmbiguousLandMax), func() { s.apply(req, apply) })
}

// apply runs the effect, records it and tells OnApply.
func (s *Store) apply(req *request, apply func() error) error {
	err := apply()
	s.trace.Begin(s.sched.now, KindStoreApply).U("req", req.seq).U("op", uint64(req.op)).
		S("key", req.key).U("err", errCode(err)).End()
	if err == nil && req.op.Mutates() {
		s.counts[req.op].Applied++
		if s.OnApply != nil {
			s.OnApply(req.op, req.key)
		}
		s.maybePurge()
	}
	return err
}

// deliver runs the callback if the incarnation is alive.
func (s *Store) deliver(req *request, deliver func(err error), err error) {
	c := &s.counts[req.op]
	if req.inc.alive && req.inc.paused {
		// The answer waits for the process to resume.
		req.inc.After(0, func() { s.deliver(req, deliver, err) })
		return
	}
	if !req.inc.alive {
		c.Dropped++
		s.trace.Begin(s.sched.now, KindStoreDrop).U("req", req.seq).U("inc", req.inc.id).End()
		return
	}
	c.Delivered++
	s.trace.Begin(s.sched.now, KindStoreDone).U("req", req.seq).U("inc", req.inc.id).U("err", errCode(err)).End()
	if err != nil {
		err = &StoreError{Op: req.op, Key: req.key, Err: err}
	}
	deliver(err)
}

// errCode is a stable small number per error for the trace hash.
func errCode(err error) uint64 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, engine.ErrAmbiguous):
		return 1
	case errors.Is(err, engine.ErrNotFound):
		return 2
	case errors.Is(err, engine.ErrPreconditionFailed):
		return 3
	case errors.Is(err, engine.ErrThrottled):
		return 4
	case errors.Is(err, engine.ErrNoSuchUpload):
		return 5
	case errors.Is(err, engine.ErrTooLarge):
		return 6
	case errors.Is(err, ErrInjected):
		return 7
	case errors.Is(err, ErrInvalidPart):
		return 8
	case errors.Is(err, ErrInvalidRange):
		return 9
	case errors.Is(err, engine.ErrRefused):
		return 10
	}
	return 255
}
