package engine

import (
	"errors"
	"fmt"
)

// Verified reads. Every object the engine reads carries its own check — a
// checksum (markers, bodies, bitmaps, checkpoints, the writer object) and
// the lengths its marker promises. An answer that fails its check may be
// damaged on the way (a flipped bit, a short read) or damaged in the
// store. The first is transient, so the object is read again, like a
// failed request; only an object that fails its check on every one of
// AttemptsMax reads is corrupt (ErrCorrupt), and then the caller halts
// what depends on it and alerts — never skips it, never uses the bytes.

// errUnverified marks an answer that failed its check.
var errUnverified = errors.New("answer failed verification")

// getVerified GETs in and checks every answer with check, retrying failed
// requests and failed checks up to AttemptsMax times in all; each failed
// check passes mark. done gets the verified body, or the last error. Only
// when every one of the AttemptsMax answers failed its check is the error
// ErrCorrupt, naming the key; a damaged answer among requests that failed
// for other reasons (an outage) is a failed read, retried by the caller
// like any other.
func (e *Engine) getVerified(in GetObjectInput, mark Mark, check func(body []byte, info ObjectInfo) error,
	done func(body []byte, info ObjectInfo, err error)) {
	var body []byte
	var info ObjectInfo
	damaged, reads := 0, 0
	e.retry(func(d func(error)) {
		reads++
		e.p.Store.GetObject(in, func(b []byte, i ObjectInfo, err error) {
			body, info = b, i
			if err == nil {
				if cerr := check(b, i); cerr != nil {
					e.mark(mark)
					damaged++
					err = fmt.Errorf("%w: %w", errUnverified, cerr)
				}
			}
			d(err)
		})
	}, func(err error, _ bool) {
		if reads < 1 || reads > AttemptsMax || damaged > reads {
			e.broken("a verified read reads 1..AttemptsMax times, each answer checked once: %s, %d reads, %d failed their check, limit %d",
				in.Key, reads, damaged, AttemptsMax)
			done(nil, ObjectInfo{}, e.err)
			return
		}
		switch {
		case damaged == AttemptsMax:
			err = fmt.Errorf("%w: %s failed its check on %d reads: %v", ErrCorrupt, in.Key, AttemptsMax, err)
		case errors.Is(err, errUnverified):
			err = fmt.Errorf("read %s: %d of %d answers failed their check, the others failed: %v", in.Key, damaged, AttemptsMax, err)
		}
		if err != nil {
			body, info = nil, ObjectInfo{}
		}
		done(body, info, err)
	})
}
