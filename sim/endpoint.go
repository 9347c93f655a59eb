package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/skipprd/skipprd/engine"
)

// HTTPEndpoint is the real HTTP source's request handling (sources/http,
// supplied by cmd/simulate through Config.HTTP). A world's sources that
// cannot replay send their units through it as requests — JSON lines or
// an Arrow IPC body, the unit's sequence number as Idempotency-Key — and the status
// it answers is what their client sees: only a 200 counts as acked.
type HTTPEndpoint interface {
	// Prepare checks and decodes one request: a pending unit for the
	// host, or the status that refuses the request.
	Prepare(namespace, contentType, key string, body []byte) (HTTPPending, int)
}

// HTTPPending is a request that passed the endpoint's checks.
type HTTPPending interface {
	Unit() engine.Unit
	Release()
	// Answer is the status the client gets for the host's answer err.
	Answer(err error) int
}

// The content types the simulated clients send.
const (
	arrowStream = "application/vnd.apache.arrow.stream"
	jsonLines   = "application/x-ndjson"
)

// errRefused stands for an answer the client retries later (a 503 while
// the host recovers, a 429 under backpressure).
var errRefused = errors.New("sim: request refused, retry later")

// request sends unit uid of source s as an HTTP request through the
// source's endpoint; done sees nil once it is answered 200. A status the
// client retries (429, 503) arrives as an error; any other refusal of a
// request the world built valid is a violation.
func (w *World) request(s *source, uid UID, in engine.Unit, done func(error)) {
	ctype, body, err := requestBody(uid, in, s.spec.Encoding)
	for _, b := range in.Batches {
		b.Release()
	}
	if err != nil {
		w.oracle.fail("unit %s: encoding its request body: %v", uid, err)
		return
	}
	p, status := s.endpoint.Prepare(s.spec.Name, ctype, clientKey(uid), body)
	switch {
	case p != nil:
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		w.sched.After(0, func() { done(fmt.Errorf("%w: %d", errRefused, status)) })
		return
	default:
		w.oracle.fail("source %s unit %s: the HTTP source refused a valid request with %d", s.spec.Name, uid, status)
		return
	}
	u := p.Unit()
	if u.IdempotencyKey != idemKey(s.spec.Name, uid) {
		w.oracle.fail("unit %s: the HTTP source keyed it %q, want %q", uid, u.IdempotencyKey, idemKey(s.spec.Name, uid))
	}
	w.submitUnit(uid, u, false, func(err error) {
		status := p.Answer(err)
		p.Release()
		switch {
		case status == http.StatusOK && err != nil:
			w.oracle.fail("unit %s: answered 200 though the host answered %v", uid, err)
		case status != http.StatusOK && err == nil:
			w.oracle.fail("unit %s: answered %d though the host acked it", uid, status)
		case status == http.StatusOK:
			w.oracle.onAck(uid)
		}
		done(err)
	})
}

// requestBody encodes a unit as its request's body: as JSON lines (the
// source infers the schema: its fields sorted by name, the row number as
// int64 — another schema fingerprint, as a client that sends JSON gets)
// or as an Arrow IPC stream in the unit schema, as encoding says (a
// SourceSpec's Encoding): "" alternates, by unit.
func requestBody(uid UID, in engine.Unit, encoding string) (string, []byte, error) {
	if encoding == EncodingArrow || encoding == "" && uid.seq()%2 == 0 {
		b, err := ipcBody(in)
		return arrowStream, b, err
	}
	var buf bytes.Buffer
	for _, b := range in.Batches {
		cols, err := UnitColumns(b)
		if err != nil {
			return "", nil, err
		}
		for i := range cols.Len() {
			payload, err := json.Marshal(cols.Payload(i))
			if err != nil {
				return "", nil, err
			}
			fmt.Fprintf(&buf, `{"uid":%d,"row":%d,"payload":%s}`+"\n", cols.UID(i), cols.Row(i), payload)
		}
	}
	return jsonLines, buf.Bytes(), nil
}

// ipcBody encodes a unit's batches as an Arrow IPC stream.
func ipcBody(in engine.Unit) ([]byte, error) {
	var buf bytes.Buffer
	wr := ipc.NewWriter(&buf, ipc.WithSchema(in.Schema))
	for _, b := range in.Batches {
		if err := wr.Write(b); err != nil {
			return nil, err
		}
	}
	if err := wr.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
