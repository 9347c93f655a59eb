package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The writer object ({root}/_writer) holds the pipeline's writer epoch:
//
//	skipprd-writer 1
//	epoch <decimal>
//	nonce <16 hex digits>
//
// Every incarnation claims epoch+1 with a conditional PUT (If-Match on the
// ETag it read, or If-None-Match: * for the first), so epochs are unique
// and grow with every start even when LIST lags: snapshot ids then sort
// in commit order across incarnations and two incarnations never write
// the same key. The nonce tells an incarnation whether an ambiguous claim
// of its own landed. One small object, rewritten in place: recovery cost
// does not grow with the number of restarts.

const writerMagic = "skipprd-writer 1"

type writerRecord struct {
	epoch uint64
	nonce uint64
}

func (w writerRecord) encode() []byte {
	return fmt.Appendf(nil, "%s\nepoch %d\nnonce %016x\n", writerMagic, w.epoch, w.nonce)
}

func parseWriterRecord(b []byte) (writerRecord, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[0] != writerMagic {
		return writerRecord{}, fmt.Errorf("%w: writer object: unknown format %q", ErrCorrupt, b)
	}
	var w writerRecord
	var err1, err2 error
	if v, ok := strings.CutPrefix(lines[1], "epoch "); ok {
		w.epoch, err1 = strconv.ParseUint(v, 10, 64)
	} else {
		err1 = errors.New("no epoch line")
	}
	if v, ok := strings.CutPrefix(lines[2], "nonce "); ok {
		w.nonce, err2 = strconv.ParseUint(v, 16, 64)
	} else {
		err2 = errors.New("no nonce line")
	}
	if err := errors.Join(err1, err2); err != nil {
		return writerRecord{}, fmt.Errorf("%w: writer object: %v", ErrCorrupt, err)
	}
	return w, nil
}

// ClaimRoundsMax bounds conditional-PUT rounds of one claim; each round
// loses only to a concurrent writer or an unheard answer.
const ClaimRoundsMax = 8

// claimEpoch reads the writer object and claims the next epoch.
func (e *Engine) claimEpoch(done func(epoch uint64, err error)) {
	e.claimRound(e.p.Rand.Uint64(), 0, done)
}

func (e *Engine) claimRound(nonce uint64, round int, done func(uint64, error)) {
	key := e.layout.WriterKey()
	var body []byte
	var info ObjectInfo
	e.retry(func(d func(error)) {
		e.p.Store.GetObject(GetObjectInput{Key: key, Limit: writerObjectLimit}, func(b []byte, i ObjectInfo, err error) {
			body, info = b, i
			d(err)
		})
	}, func(err error, _ bool) {
		in, next, err := e.nextClaim(key, nonce, body, info, err)
		if err != nil || in.Body == nil {
			done(next.epoch, err) // an error, or a claim of ours that already landed
			return
		}
		e.p.Store.PutObject(in, func(_ string, err error) {
			switch {
			case err == nil:
				done(next.epoch, nil)
			case round+1 >= ClaimRoundsMax:
				done(0, fmt.Errorf("claim writer epoch: %d rounds: %w", ClaimRoundsMax, err))
			default:
				// Lost a race, or did not hear the answer: read again.
				e.p.Timers.AfterFunc(e.backoff(round), func() { e.claimRound(nonce, round+1, done) })
			}
		})
	})
}

// nextClaim turns the read of the writer object into the conditional PUT
// that claims the next epoch. A nil in.Body with no error means the object
// already holds our nonce: an earlier, ambiguous claim of ours landed.
func (e *Engine) nextClaim(key string, nonce uint64, body []byte, info ObjectInfo, readErr error) (PutObjectInput, writerRecord, error) {
	in := PutObjectInput{Key: key}
	var cur writerRecord
	switch {
	case errors.Is(readErr, ErrNotFound):
		in.IfNoneMatch = true
	case readErr != nil:
		return in, cur, fmt.Errorf("read writer object: %w", readErr)
	default:
		var err error
		if cur, err = parseWriterRecord(body); err != nil {
			return in, cur, err
		}
		if cur.nonce == nonce {
			return in, cur, nil
		}
		in.IfMatch = info.ETag
	}
	next := writerRecord{epoch: cur.epoch + 1, nonce: nonce}
	in.Body = next.encode()
	return in, next, nil
}
