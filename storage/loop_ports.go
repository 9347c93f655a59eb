package storage

import (
	cryptorand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/recordpath"
)

// Ports wires the loop's own ports (clock, randomness, timers, executor)
// with the given store and disk into the engine's port set. Every port in
// the result completes on l.
func (l *Loop) Ports(store engine.ObjectStore, disk engine.Disk) engine.Ports {
	return engine.Ports{
		Clock:  l.Clock(),
		Rand:   NewRand(),
		Timers: Timers{loop: l},
		Exec:   Executor{loop: l},
		Store:  store,
		Disk:   disk,
	}
}

// Executor returns the loop's engine.Executor (work on a goroutine, done
// posted back to the loop), for ports built outside engine.Ports such as
// sinks.
func (l *Loop) Executor() engine.Executor { return Executor{loop: l} }

// Clock is engine.Clock on the real clocks. Monotonic counts from the
// loop's creation using Go's monotonic clock reading, so wall-clock steps
// (NTP, a suspended laptop's resync) never move it backwards.
type Clock struct {
	origin time.Time
}

// Clock returns the clock whose origin is the loop's creation.
func (l *Loop) Clock() Clock { return Clock{origin: l.origin} }

// Monotonic implements engine.Clock.
func (c Clock) Monotonic() time.Duration { return time.Since(c.origin) }

// WallUnixMs implements engine.Clock.
func (c Clock) WallUnixMs() int64 { return time.Now().UnixMilli() }

// Rand is engine.Rand: a PCG generator seeded from the OS's entropy, so two
// processes never draw the same nonces. It is not safe for concurrent use;
// only the loop calls it.
type Rand struct {
	r *rand.Rand
}

// NewRand returns a generator seeded from crypto/rand.
func NewRand() *Rand {
	var seed [16]byte
	_, _ = cryptorand.Read(seed[:]) // never fails since Go 1.24 (it panics instead)
	pcg := rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))
	return &Rand{r: rand.New(pcg)}
}

// Uint64 implements engine.Rand.
func (r *Rand) Uint64() uint64 { return r.r.Uint64() }

// Timers is engine.Timers on time.AfterFunc. The Go timer only posts; the
// decision to run fn is taken on the loop, which is what makes cancel
// exact: a timer that fired while the loop was busy has its post queued,
// and a cancel that runs before that post finds the flag set and fn is
// skipped. time.Timer.Stop alone cannot promise that.
type Timers struct {
	loop *Loop
}

// AfterFunc implements engine.Timers.
//
// REQUIRES: cancel is called on the loop, as the engine calls every port.
func (t Timers) AfterFunc(d time.Duration, fn func()) (cancel func()) {
	if fn == nil {
		panic("storage: Timers.AfterFunc(nil)")
	}
	recordpath.Spine()
	settled := false // loop-only: fn ran or cancel was called
	fire := func() {
		if settled {
			return
		}
		settled = true
		fn()
	}
	if d <= 0 {
		// Due now (every answer to a submitter): queued on the loop
		// directly, without a Go timer and the goroutine that runs it.
		t.loop.Post(fire)
		return func() { settled = true }
	}
	timer := time.AfterFunc(d, func() { t.loop.Post(fire) })
	return func() {
		settled = true
		timer.Stop() // saves the post when it has not fired yet
	}
}

// Executor is engine.Executor: work runs on a fresh goroutine, done is
// posted to the loop after work returns. The engine bounds how much work
// it hands over (one segment encode per flush), so no pool is needed.
type Executor struct {
	loop *Loop
}

// Background implements engine.Background: work runs on a fresh
// goroutine, and nothing is posted back; Host.Kill waits for it.
func (e Executor) Background(work func()) {
	if work == nil {
		panic("storage: Executor.Background(nil)")
	}
	e.loop.background.Go(work)
}

// Go implements engine.Executor.
func (e Executor) Go(work func(), done func()) {
	if work == nil || done == nil {
		panic("storage: Executor.Go with a nil function")
	}
	recordpath.Spine()
	go func() {
		work()
		e.loop.Post(done)
	}()
}
