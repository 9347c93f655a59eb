package engine

import (
	"errors"
	"fmt"
	"time"
)

// retry runs try up to AttemptsMax times, backing off between tries with
// exponential growth and jitter. It stops early when final(err) is true
// (an answer, not a failure: ErrNotFound, ErrPreconditionFailed, …). done
// gets the last outcome and whether any try was ambiguous — a caller that
// saw an ambiguous write must find out what happened before acting as if
// it had not.
func (e *Engine) retry(try func(done func(error)), done func(err error, ambiguous bool)) {
	e.retryStop(try, isAnswer, done)
}

// retryStop is retry that also stops at the first error stop accepts.
//
// REQUIRES: stop and done are functions: a missing one would fail only
// at the first failed try, or at the last answer — callbacks later, far
// from the caller that left it out (a missing try fails at once).
func (e *Engine) retryStop(try func(done func(error)), stop func(error) bool, done func(err error, ambiguous bool)) {
	if stop == nil || done == nil {
		panic(fmt.Sprintf("engine: a retry has its stop and done: stop %t, done %t", stop != nil, done != nil)) // a caller's contract, as later's
	}
	var ambiguous bool
	var run func(n int)
	run = func(n int) {
		answered := false
		try(func(err error) {
			if answered {
				e.broken("a request's attempt answers once: attempt %d answered again with %v", n+1, err)
				return
			}
			answered = true
			if errors.Is(err, ErrAmbiguous) {
				ambiguous = true
			}
			if err == nil || isAnswer(err) || stop(err) || n+1 >= AttemptsMax {
				done(err, ambiguous)
				return
			}
			e.p.Timers.AfterFunc(e.backoff(n), func() {
				e.stats.Retries++
				run(n + 1)
			})
		})
	}
	run(0)
}

// isAnswer reports errors that say something definite about the world;
// retrying them would get the same answer.
func isAnswer(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrPreconditionFailed) ||
		errors.Is(err, ErrNoSuchUpload) || errors.Is(err, ErrTooLarge)
}

// backoff is the wait after failed try n (0-based): RetryBase·2ⁿ capped at
// RetryMax, of which the upper half is jittered so that retries of many
// requests spread out.
//
// REQUIRES: n ≥ 0.
func (e *Engine) backoff(n int) time.Duration {
	if n < 0 {
		panic(fmt.Sprintf("engine: a backoff after try %d: tries count from 0", n))
	}
	d := e.cfg.RetryBase << min(n, 30)
	if d <= 0 || d > e.cfg.RetryMax {
		d = e.cfg.RetryMax
	}
	half := d / 2
	return half + time.Duration(e.p.Rand.Uint64()%uint64(half+1))
}
