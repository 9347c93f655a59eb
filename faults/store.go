package faults

import (
	"strings"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// Decide implements sim.StoreFaults. Every kind that applies to the
// request is asked, in a fixed order, and the most severe one that fired
// decides the outcome: an outage, then writes refused for good, then throttling, then definite errors,
// then timeouts and ambiguous outcomes. A latency spike adds to any.
func (in *Injector) Decide(op sim.Op, key string, now time.Duration, _ *sim.Rand) (sim.Outcome, time.Duration) {
	outage, down := in.decide(StoreOutage, in.plan.StoreOutage.In(now), pickOutcome(sim.Fail, sim.AmbiguousLost, sim.Throttle))
	_, refused := in.decide(StoreRefused, op.Mutates() && in.plan.StoreRefused.In(now), nil)
	spike, _ := in.decide(LatencySpike, false, func(r *sim.Rand) int64 { return int64(r.Duration(0, in.plan.SpikeMax)) })
	throttle := in.fires(Throttle)
	failed, failure := in.opFailure(op)
	ambiguous, amb := in.ambiguity(op, key)
	outcome := sim.OK
	switch {
	case down:
		outcome = sim.Outcome(outage)
	case refused:
		outcome = sim.Refused
	case throttle:
		outcome = sim.Throttle
	case failed:
		outcome = failure
	case ambiguous:
		outcome = amb
	}
	return outcome, time.Duration(spike)
}

// opFailure asks the definite-error kind of op (and the multipart kinds,
// which may also apply and report failure).
func (in *Injector) opFailure(op sim.Op) (bool, sim.Outcome) {
	var k Kind
	draw := pickOutcome(sim.Fail)
	switch op {
	case sim.OpPut:
		k = PutError
	case sim.OpGet, sim.OpHead:
		k = GetError
	case sim.OpList, sim.OpListUploads:
		k = ListError
	case sim.OpDelete:
		k = DeleteError
	case sim.OpUploadPart:
		lost, gone := in.decide(UploadLost, false, pickOutcome(sim.UploadGone))
		o, failed := in.decide(MultipartPart, false, pickOutcome(sim.Fail, sim.AmbiguousApplied))
		if gone {
			return true, sim.Outcome(lost)
		}
		return failed, sim.Outcome(o)
	case sim.OpComplete:
		// The upload may be gone when Complete arrives (a lifecycle rule
		// aborted it) — also when Complete is a retry after an unheard one.
		if lost, gone := in.decide(UploadLost, false, pickOutcome(sim.UploadGone)); gone {
			return true, sim.Outcome(lost)
		}
		// S3's Complete is slow and known to answer an error after doing
		// the work: applied-but-unheard is the likeliest failure.
		k, draw = MultipartComplete, pickOutcome(sim.Fail, sim.AmbiguousApplied, sim.AmbiguousApplied, sim.AmbiguousLost)
	case sim.OpAbort:
		k, draw = MultipartAbort, pickOutcome(sim.Fail, sim.AmbiguousApplied)
	default:
		return false, sim.OK
	}
	o, ok := in.decide(k, false, draw)
	return ok, sim.Outcome(o)
}

// ambiguity asks the timeout and ambiguous-outcome kinds that apply: a
// read may time out; a write may land unheard or be lost unheard, with
// kinds per object class so that a swarm can aim at marker PUTs, bitmap
// writes, deletes or the control objects.
func (in *Injector) ambiguity(op sim.Op, key string) (bool, sim.Outcome) {
	if !op.Mutates() {
		if in.fires(ReadTimeout) {
			return true, sim.AmbiguousLost
		}
		return false, sim.OK
	}
	either := pickOutcome(sim.AmbiguousApplied, sim.AmbiguousLost)
	var class Kind = NumKinds
	switch {
	case op == sim.OpDelete:
		class = AmbiguousDelete
	case op != sim.OpPut:
	case strings.HasSuffix(key, ".seg.commit"):
		class = AmbiguousMarker
	case strings.HasSuffix(key, ".seg.scbl"):
		class = AmbiguousBitmap
	case strings.HasSuffix(key, "/_writer"), strings.HasSuffix(key, "/_offsets"), strings.Contains(key, "/_idem/"):
		class = AmbiguousControl
	}
	var fired bool
	var o int64
	if class < NumKinds {
		o, fired = in.decide(class, false, either)
	}
	if o2, ok := in.decide(Ambiguous, false, either); ok && !fired {
		o, fired = o2, true
	}
	return fired, sim.Outcome(o)
}

func pickOutcome(outcomes ...sim.Outcome) func(r *sim.Rand) int64 {
	return func(r *sim.Rand) int64 { return int64(outcomes[r.Intn(len(outcomes))]) }
}

// DiskFaults returns the plan's disk injector.
func (in *Injector) DiskFaults() sim.DiskFaults {
	return sim.DiskFaultsFunc(func(op sim.DiskOp, path string, _ *sim.Rand) (sim.DiskOutcome, time.Duration) {
		slow, _ := in.decide(SlowIO, false, func(r *sim.Rand) int64 { return int64(r.Duration(0, in.plan.SpikeMax+time.Second)) })
		outcome := sim.DiskOK
		switch op {
		case sim.DiskSync:
			if in.fires(FsyncError) {
				outcome = sim.DiskIOError
			}
		case sim.DiskWrite:
			if in.fires(DiskWriteError) {
				outcome = sim.DiskIOError
			}
		}
		if op == sim.DiskWrite || op == sim.DiskOpen || op == sim.DiskMkdirAll {
			if in.fires(DiskFull) && outcome == sim.DiskOK {
				outcome = sim.DiskNoSpace
			}
		}
		// Bit flips hit the disk WAL's log, which must detect them (its
		// CRCs) and halt, never deliver; a destination does not read its
		// files back, so flipping them would test the oracle's reader.
		if (op == sim.DiskRead || op == sim.DiskSync) && strings.HasPrefix(path, "wal/") {
			if in.fires(BitFlip) && outcome == sim.DiskOK {
				outcome = sim.DiskBitFlip
			}
		}
		return outcome, time.Duration(slow)
	})
}
