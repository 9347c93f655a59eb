package sim

import "time"

// Latency models how long one simulated operation takes: a fixed Base, an
// exponential-ish Tail (mean) for queueing and stragglers, and a
// size-dependent part for payload transfer. Varying latencies are what make
// two requests in flight complete in either order, which the port contracts
// allow and the engine must survive.
type Latency struct {
	Base   time.Duration // paid by every request
	Tail   time.Duration // mean of the random tail (Rand.Exp); 0 = none
	PerMiB time.Duration // paid per MiB of payload, pro rata
}

// Sample draws one latency for an operation moving bytes of payload.
// It always returns at least 1ns, so a completion is never at the instant
// of the request — that keeps "later, never synchronously" visible in the
// trace even for zero-configured latencies.
func (l Latency) Sample(r *Rand, bytes int) time.Duration {
	d := l.Base + r.Exp(l.Tail)
	if l.PerMiB > 0 && bytes > 0 {
		d += time.Duration(int64(bytes) * int64(l.PerMiB) >> 20)
	}
	if d < 1 {
		d = 1
	}
	return d
}

// Constant returns a Latency of exactly d (no tail, no size part).
func Constant(d time.Duration) Latency { return Latency{Base: d} }
