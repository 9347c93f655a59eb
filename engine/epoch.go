package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// ClaimRoundsMax bounds conditional-PUT rounds of one claim; each round
// loses only to a concurrent writer or an unheard answer.
const ClaimRoundsMax = 8

// claimEpoch reads the writer object and claims the next epoch. done gets
// the record now stored (seals carried over) and its ETag.
func (e *Engine) claimEpoch(done func(rec writerRecord, etag string, err error)) {
	e.claimRound(e.p.Rand.Uint64(), 0, done)
}

func (e *Engine) claimRound(nonce uint64, round int, done func(writerRecord, string, error)) {
	if round < 0 || round >= ClaimRoundsMax {
		done(writerRecord{}, "", invariantError("a claim makes at most ClaimRoundsMax rounds: round %d, limit %d", round, ClaimRoundsMax))
		return
	}
	e.readWriter(func(cur writerRecord, info ObjectInfo, err error) {
		found := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			done(cur, "", err)
			return
		}
		if found && cur.nonce == nonce {
			e.mark(MarkClaimLanded)
			done(cur, info.ETag, nil) // an earlier, ambiguous claim of ours landed
			return
		}
		next := writerRecord{epoch: cur.epoch + 1, nonce: nonce, wal: cur.wal, floor: cur.floor, seals: cur.seals}
		if next.epoch <= cur.epoch {
			done(next, "", invariantError("a claim takes a newer epoch: epoch %d after %d", next.epoch, cur.epoch))
			return
		}
		if next.wal.IsZero() {
			// The first claim of this log (or the first by a build that
			// knows identities): the log gets its identity now.
			if next.wal = e.newWALID(); next.wal.IsZero() {
				done(next, "", e.err) // newWALID failed closed
				return
			}
		}
		if err := next.check(); err != nil {
			done(next, "", err) // never write a record that breaks what it promises
			return
		}
		in := PutObjectInput{Key: e.layout.WriterKey(), Body: next.encode(), IfNoneMatch: !found}
		if found {
			in.IfMatch = info.ETag
		}
		e.p.Store.PutObject(in, func(etag string, err error) {
			switch {
			case err == nil:
				done(next, etag, nil)
			case round+1 >= ClaimRoundsMax:
				done(next, "", fmt.Errorf("claim writer epoch: %d rounds: %w", ClaimRoundsMax, err))
			default:
				// Lost a race, or did not hear the answer: read again.
				e.mark(MarkClaimRetry)
				e.p.Timers.AfterFunc(e.backoff(round), func() { e.claimRound(nonce, round+1, done) })
			}
		})
	})
}

// newWALID draws a log identity: 128 bits from the Rand port (the
// production port is crypto-seeded; the simulator's streams differ per
// pipeline), never zero. A port that draws zero walIDDrawsMax times is
// broken: it fails the engine closed (and the zero id is returned).
func (e *Engine) newWALID() segment.WALID {
	var id segment.WALID
	for draws := 0; id.IsZero(); draws++ {
		if draws == walIDDrawsMax {
			e.broken("a log identity is drawn non-zero: %d draws of the Rand port gave zero", draws)
			return id
		}
		binary.LittleEndian.PutUint64(id[:8], e.p.Rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], e.p.Rand.Uint64())
	}
	return id
}

// walIDDrawsMax bounds newWALID's loop: a random draw is zero once in
// 2¹²⁸.
const walIDDrawsMax = 4

// readWriter GETs and parses the writer object (retrying failures and
// answers that fail their checksum). ErrNotFound means no writer ever
// claimed the pipeline; ErrCorrupt, that the object itself is damaged.
func (e *Engine) readWriter(done func(writerRecord, ObjectInfo, error)) {
	var rec writerRecord
	in := GetObjectInput{Key: e.layout.WriterKey(), Limit: writerObjectLimit}
	e.getVerified(in, MarkReadDamaged, func(b []byte, _ ObjectInfo) (err error) {
		rec, err = parseWriterRecord(b)
		return err
	}, func(_ []byte, info ObjectInfo, err error) {
		if err != nil {
			done(writerRecord{}, info, fmt.Errorf("read writer object: %w", err))
			return
		}
		done(rec, info, nil)
	})
}
