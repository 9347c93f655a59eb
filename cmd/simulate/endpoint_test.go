package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// runHTTPWorld runs seed 11's world under the flaky profile (store
// faults make the host refuse and fail units) with the HTTP source's
// units going through the endpoint ep builds. Its HTTP sources are set
// to rotate Arrow, JSON lines and CSV, evolve their schemas and send
// many invalid first requests under a body cap, whatever the seed drew.
func runHTTPWorld(t *testing.T, ep func(sim.HTTPOptions) sim.HTTPEndpoint) sim.Result {
	t.Helper()
	j, err := drawJob(11, 20000, "flaky")
	if err != nil {
		t.Fatal(err)
	}
	httpSources := 0
	for i := range j.spec.Sources {
		src := &j.spec.Sources[i]
		if src.Replayable {
			continue
		}
		httpSources++
		src.Encoding, src.ExtraField, src.RefusePermille = sim.EncodingMixed3, true, 300
		src.WidenField = kindOf(j.spec, src.Sink) != "postgres"
		src.BodyCap = int64(src.RowsMax)*int64(src.PayloadMax+128) + 4096
	}
	if httpSources == 0 {
		t.Fatal("seed 11's world has no HTTP source any more: pick another seed")
	}
	// A second endpoint into a sink that takes widened columns (a
	// Postgres sink refuses bigint into double precision, by design).
	for _, k := range j.spec.Sinks {
		if k.Kind != "postgres" {
			web := j.spec.Sources[0]
			web.Name, web.Sink, web.Replayable, web.InFlight, web.WidenField = "web", k.Ref, false, 4, true
			j.spec.Sources = append(j.spec.Sources, web)
			break
		}
	}
	cfg, _ := j.config()
	cfg.HTTP = ep
	return sim.NewWorld(cfg).Run(time.Now)
}

// kindOf is the kind of the sink ref goes to ("" is "lake").
func kindOf(s sim.WorldSpec, ref string) string {
	if ref == "" {
		ref = "lake"
	}
	for _, k := range s.Sinks {
		if k.Ref == ref {
			return k.Kind
		}
	}
	return ""
}

// The real endpoint: a clean run, every HTTP unit answered 200 acked
// once, and bodies of every kind sent: CSV, evolved schemas, and
// invalid first requests refused 400, 413 and 415.
func TestHTTPEndpointWorld(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	res := runHTTPWorld(t, httpEndpoint)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Acks == 0 {
		t.Fatal("nothing acked")
	}
	for _, m := range []string{sim.MarkHTTPCSV, sim.MarkHTTPExtraField, sim.MarkHTTPWidened, sim.MarkHTTPRefused400,
		sim.MarkHTTPRefused413, sim.MarkHTTPRefused413Chunked, sim.MarkHTTPRefused415} {
		if res.WorldMarks[m] == 0 {
			t.Errorf("no %s in the world (marks %v)", m, res.WorldMarks)
		}
	}
}

// lying wraps the real endpoint and changes one thing.
type lying struct {
	sim.HTTPEndpoint
	answer  func(status int, err error) int
	rows    func(rows int64) int64
	key     func(string) string
	ctype   func(ct string, body []byte) string
	refusal func(ctype string, status int) int
}

func (l lying) Prepare(ns, ct, key string, length int64, body []byte) (sim.HTTPPending, int) {
	if l.key != nil {
		key = l.key(key)
	}
	if l.ctype != nil {
		ct = l.ctype(ct, body)
	}
	p, st := l.HTTPEndpoint.Prepare(ns, ct, key, length, body)
	if l.refusal != nil {
		if p != nil {
			if st = l.refusal(ct, 0); st != 0 {
				p.Release()
				return nil, st
			}
		} else {
			st = l.refusal(ct, st)
		}
	}
	if p == nil {
		return nil, st
	}
	return lyingPending{p, l}, 0
}

type lyingPending struct {
	sim.HTTPPending
	l lying
}

func (p lyingPending) Answer(err error) (int, int64) {
	st, rows := p.HTTPPending.Answer(err)
	if p.l.answer != nil {
		st = p.l.answer(st, err)
	}
	if p.l.rows != nil {
		rows = p.l.rows(rows)
	}
	return st, rows
}

// The oracles catch an endpoint that answers 200 for a unit the host did
// not ack, one that refuses a unit the host acked, and one that keys a
// request other than by its Idempotency-Key (a retry would be stored
// twice).
func TestHTTPEndpointOracles(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	for _, c := range []struct {
		name string
		l    lying
		want string
	}{
		{"200 for a failure", lying{answer: func(st int, err error) int {
			if err != nil {
				return http.StatusOK
			}
			return st
		}}, "answered 200 though the host answered"},
		{"503 for an ack", lying{answer: func(st int, err error) int {
			if err == nil {
				return http.StatusServiceUnavailable
			}
			return st
		}}, "though the host acked it"},
		{"another key", lying{key: func(k string) string { return k + "x" }}, "the HTTP source keyed it"},
		{"another row count", lying{rows: func(r int64) int64 { return r + 1 }}, "answered 200 with"},
		// Refused requests: one taken as valid, one refused with
		// another status than its fault's, and a valid CSV body refused.
		{"accepts an unknown type", lying{ctype: func(ct string, body []byte) string {
			if ct != "application/json" && ct != "text/plain" {
				return ct
			}
			switch { // the type the body has
			case strings.HasPrefix(string(body), "{"):
				return "application/x-ndjson"
			case strings.HasPrefix(string(body), "uid,"):
				return "text/csv"
			}
			return "application/vnd.apache.arrow.stream"
		}}, "accepted an invalid request"},
		{"413 as 400", lying{refusal: func(_ string, st int) int {
			if st == http.StatusRequestEntityTooLarge {
				return http.StatusBadRequest
			}
			return st
		}}, "want 413"},
		{"refuses CSV", lying{refusal: func(ct string, st int) int {
			if ct == "text/csv" {
				return http.StatusUnsupportedMediaType
			}
			return st
		}}, "refused a valid request (csv) with 415"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runHTTPWorld(t, func(opt sim.HTTPOptions) sim.HTTPEndpoint {
				l := c.l
				l.HTTPEndpoint = httpEndpoint(opt)
				return l
			})
			if !strings.Contains(strings.Join(res.Violations, "\n"), c.want) {
				t.Fatalf("violations %q, want one saying %q", res.Violations, c.want)
			}
		})
	}
}

// A world whose cap is below the bodies its clients build fails loudly:
// its invalid requests would not be what they say, nor its valid ones.
func TestHTTPWorldChecksItsCap(t *testing.T) {
	j, err := drawJob(11, 5000, "none")
	if err != nil {
		t.Fatal(err)
	}
	for i := range j.spec.Sources {
		if !j.spec.Sources[i].Replayable {
			j.spec.Sources[i].BodyCap = 64
		}
	}
	cfg, _ := j.config()
	res := sim.NewWorld(cfg).Run(time.Now)
	if !strings.Contains(strings.Join(res.Violations, "\n"), "over its own cap") {
		t.Fatalf("violations %q", res.Violations)
	}
}
