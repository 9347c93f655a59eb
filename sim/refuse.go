package sim

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
)

// Refused requests (SourceSpec.RefusePermille). A client's first attempt
// at some units is invalid — a malformed line (400), a Content-Type the
// source does not take (415), a body over the endpoint's cap (413, with
// its length declared or not) — sent under the unit's Idempotency-Key;
// once the source refused it, the client sends the valid body under the
// same key. The source must refuse each with exactly its status, and a
// refusal must change nothing: the valid request is then stored once and
// answered 200 with its row count, which the exactly-once oracles check
// as they check every unit. A 503 or 429 (the host recovering, full)
// leaves the invalid request to be sent again with the next attempt.

// invalidKind is what is wrong with a unit's first request.
type invalidKind uint8

const (
	invalidNone invalidKind = iota
	invalidLine             // a malformed JSON line or a ragged CSV record: 400
	invalidType             // an unknown Content-Type: 415
	invalidSize             // over the body cap: 413
)

// invalidOf is what is wrong with unit uid's first request, if anything:
// a pure function of its id. A body over the cap needs a cap.
func invalidOf(spec SourceSpec, uid UID) invalidKind {
	h := mix64(uint64(uid) ^ 0x5eed0f4e0f5eed00)
	if spec.RefusePermille <= 0 || h%1000 >= uint64(spec.RefusePermille) {
		return invalidNone
	}
	k := invalidKind(1 + (h>>16)%3)
	if k == invalidSize && spec.BodyCap <= 0 {
		k = invalidLine
	}
	return k
}

// invalidRequest is an invalid request and the status it must get.
type invalidRequest struct {
	ctype  string
	body   []byte
	length int64 // declared Content-Length, -1 for none
	want   int
	mark   string
}

// sendInvalid sends unit uid's invalid first request if it is still due,
// and checks the answer. It reports false with the status if the source
// did not judge it (503, 429): the client tries again later, invalid
// request first.
func (w *World) sendInvalid(s *source, uid UID, valid requestText) (int, bool) {
	k := invalidOf(s.spec, uid)
	if k == invalidNone || s.refused[uid.seq()] {
		return 0, true
	}
	req := buildInvalid(k, s.spec, uid, valid)
	p, status := s.endpoint.Prepare(s.spec.Name, req.ctype, clientKey(uid), req.length, req.body)
	switch {
	case p != nil:
		p.Release()
		w.oracle.fail("source %s unit %s: the HTTP source accepted an invalid request (%s), which it must refuse with %d",
			s.spec.Name, uid, req.mark, req.want)
	case laterStatus(status):
		return status, false
	case status != req.want:
		w.oracle.fail("source %s unit %s: the HTTP source answered an invalid request (%s) %d, want %d", s.spec.Name, uid, req.mark, status, req.want)
	default:
		w.mark(req.mark)
	}
	s.refused[uid.seq()] = true
	return 0, true
}

// The Content-Types a client gets wrong: JSON that is not JSON lines, no
// type a source decodes, CSV in a charset it refuses.
var unknownTypes = []string{"application/json", "text/plain", "text/csv; charset=iso-8859-1", "application/x-protobuf"}

// buildInvalid is unit uid's invalid request of kind k, made from its
// valid one.
func buildInvalid(k invalidKind, spec SourceSpec, uid UID, valid requestText) invalidRequest {
	h := mix64(uint64(uid) ^ 0xbad0bad0)
	switch k {
	case invalidType:
		ct := unknownTypes[h%uint64(len(unknownTypes))]
		return invalidRequest{ctype: ct, body: valid.bytes, length: int64(len(valid.bytes)), want: http.StatusUnsupportedMediaType, mark: MarkHTTPRefused415}
	case invalidSize:
		// Blank lines after the rows: valid JSON lines or CSV but for
		// the cap (a unit due as Arrow sends one JSON line).
		ct, body := valid.ctype, bytes.Clone(valid.bytes)
		if ct == arrowStream {
			ct, body = jsonLines, []byte(`{"uid":0,"row":0,"payload":"x"}`+"\n")
		}
		body = append(body, bytes.Repeat([]byte{'\n'}, int(spec.BodyCap)+1-len(body)+int(h%64))...)
		req := invalidRequest{ctype: ct, body: body, length: int64(len(body)), want: http.StatusRequestEntityTooLarge, mark: MarkHTTPRefused413}
		if (h>>8)%2 == 0 {
			req.length, req.mark = -1, MarkHTTPRefused413Chunked // the source finds out as it reads
		}
		return req
	}
	ct, body := malformed(valid, uid, h)
	return invalidRequest{ctype: ct, body: body, length: int64(len(body)), want: http.StatusBadRequest, mark: MarkHTTPRefused400}
}

// malformed is the valid body with one record broken: for CSV a record
// with a cell too many, for JSON lines (and a unit due as Arrow, sent as
// JSON lines) a line that is no JSON object, or repeats a key, or holds
// a string where the other lines have numbers.
func malformed(valid requestText, uid UID, h uint64) (string, []byte) {
	if valid.ctype == textCSV {
		lines := strings.SplitAfter(string(valid.bytes), "\n")
		at := 1 + int(h%uint64(len(lines)-2)) // a record, not the header
		lines[at] = strings.TrimSuffix(lines[at], "\n") + ",surplus\n"
		return textCSV, []byte(strings.Join(lines, ""))
	}
	bad := [...]string{
		`{"uid":%d,"row":0,"payload":"unterminated}`,
		`{"uid":%d,"row":0,"row":1,"payload":"twice"}`,
		`{"uid":%d,"row":0,"payload":"trailing"},`,
		`{"uid":"%d","row":0,"payload":"a string uid"}`, // bad only after a line with a number
	}
	if valid.ctype != jsonLines {
		// An Arrow unit: a body of one bad line, bad on its own.
		return jsonLines, []byte(fmt.Sprintf(bad[h%3], uid) + "\n")
	}
	line := fmt.Sprintf(bad[h%4], uid) + "\n"
	// After the first line, so the string uid meets numbers before it.
	first := bytes.IndexByte(valid.bytes, '\n') + 1
	body := append(bytes.Clone(valid.bytes[:first]), line...)
	return jsonLines, append(body, valid.bytes[first:]...)
}
