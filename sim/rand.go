package sim

import (
	"math/bits"
	"time"
)

// Rand is a deterministic pseudo-random stream (SplitMix64). Every
// subsystem of the world draws from its own stream, derived from the root
// seed with Split, so that a change in how often one subsystem draws (a new
// fault site, one more latency sample) never perturbs another's sequence.
// That is what keeps old regression seeds meaningful as the world grows.
//
// Only integer arithmetic decides anything that affects event order:
// floating-point results can differ across architectures (FMA fusion), and
// a seed must replay identically on every CI machine.
//
// Rand implements engine.Rand.
type Rand struct {
	// seed identifies the stream; Split derives children from it alone.
	// INVARIANT: never changes after NewRand.
	seed uint64
	// state is the SplitMix64 counter; it advances by one golden-ratio
	// step per draw.
	state uint64
}

// golden is 2^64 / φ, the SplitMix64 increment.
const golden = 0x9e3779b97f4a7c15

// NewRand returns the stream for seed.
func NewRand(seed uint64) *Rand {
	return &Rand{seed: seed, state: seed}
}

// Seed returns the seed this stream was created with.
func (r *Rand) Seed() uint64 { return r.seed }

// Split derives an independent child stream named label. The child depends
// only on this stream's seed and the label — not on how many values have
// been drawn — so subsystems can be added or reordered without changing
// the streams of the others. Splitting the same label twice yields the same
// stream; give each consumer its own label.
func (r *Rand) Split(label string) *Rand {
	return NewRand(mix64(r.seed ^ mix64(hashString(label))))
}

// Uint64 returns the next value of the stream.
func (r *Rand) Uint64() uint64 {
	r.state += golden
	return mix64(r.state)
}

// Uint64n returns a uniform value in [0, n) without modulo bias
// (Lemire's multiply-shift with rejection).
// REQUIRES: n > 0.
func (r *Rand) Uint64n(n uint64) uint64 {
	if n == 0 {
		panic("sim: Rand.Uint64n(0)")
	}
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// Intn returns a uniform value in [0, n).
// REQUIRES: n > 0.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		panic("sim: Rand.Intn: n must be positive")
	}
	return int(r.Uint64n(uint64(n)))
}

// Float64 returns a uniform value in [0, 1). It is exact (53 random bits
// scaled by a power of two), so comparisons against it are portable.
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * 0x1p-53
}

// Chance reports true with probability p. p <= 0 never draws true and
// p >= 1 always does; both still consume one draw so that a fault rate
// changing between 0 and non-zero does not shift the rest of the stream.
func (r *Rand) Chance(p float64) bool {
	return r.Float64() < p
}

// Duration returns a uniform duration in [lo, hi].
// REQUIRES: lo <= hi.
func (r *Rand) Duration(lo, hi time.Duration) time.Duration {
	if lo > hi {
		panic("sim: Rand.Duration: lo > hi")
	}
	if lo == hi {
		return lo
	}
	return lo + time.Duration(r.Uint64n(uint64(hi-lo)+1))
}

// ln2Q20 is ln 2 in Q20 fixed point (0.693147 × 2^20).
const ln2Q20 = 726817

// Exp returns an approximately exponential duration with the given mean,
// using integers only. An exponential variable divided by (mean · ln 2)
// has a geometric integer part (p = 1/2: the count of leading zero bits of
// a uniform word) and a fractional part we draw uniformly; the result is a
// heavy-enough tail for latency models (most samples near zero, a few many
// times the mean) while staying portable across architectures.
func (r *Rand) Exp(mean time.Duration) time.Duration {
	if mean <= 0 {
		return 0
	}
	k := uint64(bits.LeadingZeros64(r.Uint64() | 1)) // ≤ 63, so result < 45 × mean
	frac := r.Uint64() >> 32                         // Q32 in [0, 1)
	m := uint64(mean)
	hi, lo := bits.Mul64(m, frac)
	x := m*k + (hi<<32 | lo>>32) // mean × (k + frac)
	hi, lo = bits.Mul64(x, ln2Q20)
	return time.Duration(hi<<44 | lo>>20)
}

// mix64 is the SplitMix64 finalizer: a bijective avalanche of 64 bits.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hashString is 64-bit FNV-1a, used to turn stream labels into seeds.
func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)
