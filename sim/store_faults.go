package sim

import "time"

// Op is one of the ten ObjectStore operations.
type Op uint8

// Object-store operations. The values index counters and are hashed into
// the trace: append only.
const (
	OpPut Op = iota
	OpGet
	OpHead
	OpList
	OpDelete
	OpCreateUpload
	OpUploadPart
	OpComplete
	OpAbort
	OpListUploads
	NumOps
)

var opNames = [NumOps]string{
	OpPut:          "put",
	OpGet:          "get",
	OpHead:         "head",
	OpList:         "list",
	OpDelete:       "delete",
	OpCreateUpload: "create-upload",
	OpUploadPart:   "upload-part",
	OpComplete:     "complete",
	OpAbort:        "abort",
	OpListUploads:  "list-uploads",
}

// String returns the operation's name.
func (op Op) String() string {
	if op < NumOps {
		return opNames[op]
	}
	return "op?"
}

// Mutates reports whether the operation can change the store's state.
func (op Op) Mutates() bool {
	switch op {
	case OpGet, OpHead, OpList, OpListUploads:
		return false
	}
	return true
}

// Outcome is what the fault injector decides for one store request.
type Outcome uint8

const (
	// OK: the request is processed normally.
	OK Outcome = iota
	// Fail: a definite error (ErrInjected); no effect.
	Fail
	// Throttle: engine.ErrThrottled (503 SlowDown); no effect.
	Throttle
	// AmbiguousApplied: the effect applies, but the caller gets an error
	// wrapping engine.ErrAmbiguous (the response was lost). With
	// StoreConfig.AmbiguousLandMax > 0 the effect may land after the
	// caller has been told.
	AmbiguousApplied
	// AmbiguousLost: no effect, and the caller gets engine.ErrAmbiguous.
	AmbiguousLost
	// UploadGone: the multipart upload was aborted by someone else (a
	// bucket lifecycle rule, another client) just before this UploadPart
	// or Complete: it is aborted now and the request fails with
	// engine.ErrNoSuchUpload. Other operations treat it as OK.
	UploadGone
	// Refused: the store refuses the request for good (engine.ErrRefused:
	// a 403 of credentials that lost write access); no effect.
	Refused
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "fail", "throttle", "ambiguous-applied", "ambiguous-lost", "upload-gone", "refused"}

// String returns the outcome's name.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "outcome?"
}

// StoreFaults decides the fate of each store request. The store calls
// Decide once per request, when it is issued, at simulated time now, with
// the store's own fault stream r (a plan may draw from its own stream
// instead: either way a plan's draws never perturb latencies or lags);
// the outcome takes effect at completion, extraLatency is added to the
// request's sampled latency (slow requests, timeouts). Decide must be
// deterministic given its inputs and its own state.
type StoreFaults interface {
	Decide(op Op, key string, now time.Duration, r *Rand) (outcome Outcome, extraLatency time.Duration)
}

// ReadCorrupter is optionally implemented by a StoreFaults: asked once
// per successful GET, it decides whether the answer is corrupted on the
// way back (CorruptBytes says how, from the parameter). The stored
// object stays intact.
type ReadCorrupter interface {
	CorruptRead(key string) (param int64, ok bool)
}

// StoreFaultsFunc adapts a function to StoreFaults.
type StoreFaultsFunc func(op Op, key string, r *Rand) (Outcome, time.Duration)

// Decide calls f.
func (f StoreFaultsFunc) Decide(op Op, key string, _ time.Duration, r *Rand) (Outcome, time.Duration) {
	return f(op, key, r)
}

// CorruptBytes returns b damaged as param says: even params flip one bit,
// odd ones cut b short (keeping at least nothing, at most all but one
// byte). b is the caller's copy; an empty b stays empty.
func CorruptBytes(b []byte, param int64) []byte {
	if len(b) == 0 {
		return b
	}
	u := uint64(param)
	if u&1 == 0 {
		bit := (u >> 1) % uint64(len(b)*8)
		b[bit/8] ^= 1 << (bit % 8)
		return b
	}
	return b[:(u>>1)%uint64(len(b))]
}
