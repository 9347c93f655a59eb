package sim

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/skipprd/skipprd/engine"
)

// HTTPEndpoint is the real HTTP source's request handling (sources/http,
// supplied by cmd/simulate through Config.HTTP). A world's sources that
// cannot replay send their units through it as requests — an Arrow IPC
// stream, JSON lines or CSV (endpoint_body.go), the unit's sequence
// number as Idempotency-Key, now and then after an invalid request under
// the same key (refuse.go) — and the status it answers is what their
// client sees: only a 200 counts as acked.
type HTTPEndpoint interface {
	// Prepare checks and decodes one request: a pending unit for the
	// host, or the status that refuses the request. length is the
	// Content-Length the client declares, -1 for none (chunked).
	Prepare(namespace, contentType, key string, length int64, body []byte) (HTTPPending, int)
}

// HTTPPending is a request that passed the endpoint's checks.
type HTTPPending interface {
	Unit() engine.Unit
	Release()
	// Answer is what the client gets for the host's answer err: the
	// status and, with a 200, the row count the answer's body states.
	Answer(err error) (status int, rows int64)
}

// HTTPOptions configure one source's endpoint.
type HTTPOptions struct {
	Sink  string      // the sink its namespace goes to
	Ready func() bool // whether the host has recovered
	// BodyCap is the endpoint's body cap (SourceSpec.BodyCap); 0: the
	// HTTP source's default.
	BodyCap int64
}

// The content types the simulated clients send.
const (
	arrowStream = "application/vnd.apache.arrow.stream"
	jsonLines   = "application/x-ndjson"
	textCSV     = "text/csv"
)

// errRefused stands for an answer the client retries later (a 503 while
// the host recovers, a 429 under backpressure).
var errRefused = errors.New("sim: request refused, retry later")

// laterStatus reports a status the client retries later, with the same
// request.
func laterStatus(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
}

// request sends unit uid of source s as an HTTP request through the
// source's endpoint — after the unit's invalid first request, while
// that is due — and done sees nil once it is answered 200. A status the
// client retries (429, 503) arrives as an error; any other refusal of a
// request the world built valid is a violation.
func (w *World) request(s *source, uid UID, in engine.Unit, done func(error)) {
	body, err := requestBody(s.spec, uid, in)
	for _, b := range in.Batches {
		b.Release()
	}
	if err != nil {
		w.oracle.fail("unit %s: encoding its request body: %v", uid, err)
		return
	}
	if status, judged := w.sendInvalid(s, uid, body); !judged {
		w.sched.After(0, func() { done(fmt.Errorf("%w: %d", errRefused, status)) })
		return
	}
	if s.spec.BodyCap > 0 && int64(len(body.bytes)) > s.spec.BodyCap {
		w.oracle.fail("unit %s: the world built a body of %d bytes, over its own cap of %d", uid, len(body.bytes), s.spec.BodyCap)
		return
	}
	p, status := s.endpoint.Prepare(s.spec.Name, body.ctype, clientKey(uid), int64(len(body.bytes)), body.bytes)
	switch {
	case p != nil:
	case laterStatus(status):
		w.sched.After(0, func() { done(fmt.Errorf("%w: %d", errRefused, status)) })
		return
	default:
		w.oracle.fail("source %s unit %s: the HTTP source refused a valid request (%s) with %d", s.spec.Name, uid, body.encoding, status)
		return
	}
	u := p.Unit()
	if u.IdempotencyKey != idemKey(s.spec.Name, uid) {
		w.oracle.fail("unit %s: the HTTP source keyed it %q, want %q", uid, u.IdempotencyKey, idemKey(s.spec.Name, uid))
	}
	w.submitUnit(uid, u, nil, func(err error) {
		status, rows := p.Answer(err)
		p.Release()
		w.answered(s, uid, body, err, status, rows)
		done(err)
	})
}

// answered checks the status the client got for the host's answer err:
// 200 exactly when the host acked, stating the body's rows.
func (w *World) answered(s *source, uid UID, body requestText, err error, status int, rows int64) {
	switch {
	case status == http.StatusOK && err != nil:
		w.oracle.fail("unit %s: answered 200 though the host answered %v", uid, err)
	case status != http.StatusOK && err == nil:
		w.oracle.fail("unit %s: answered %d though the host acked it", uid, status)
	case status == http.StatusOK && rows != int64(unitRows(s.spec, uid)):
		w.oracle.fail("unit %s: answered 200 with %d rows; its body had %d", uid, rows, unitRows(s.spec, uid))
	case status == http.StatusOK:
		w.oracle.onAck(uid)
		w.markAnswered(body)
	}
}

// markAnswered counts the rare shapes of a body answered 200.
func (w *World) markAnswered(body requestText) {
	switch body.encoding {
	case EncodingCSV:
		w.mark(MarkHTTPCSV)
	case csvAsJSON:
		w.mark(MarkHTTPCSVAsJSON)
	}
	if body.shape.tag {
		w.mark(MarkHTTPExtraField)
	}
	if body.shape.score == scoreFloat {
		w.mark(MarkHTTPWidened)
	}
}
