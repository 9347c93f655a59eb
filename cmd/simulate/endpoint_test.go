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
// units going through the endpoint ep builds.
func runHTTPWorld(t *testing.T, ep func(sink string, ready func() bool) sim.HTTPEndpoint) sim.Result {
	t.Helper()
	j, err := drawJob(11, 20000, "flaky")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := j.config()
	cfg.HTTP = ep
	return sim.NewWorld(cfg).Run(time.Now)
}

// The real endpoint: a clean run, every HTTP unit answered 200 acked once.
func TestHTTPEndpointWorld(t *testing.T) {
	res := runHTTPWorld(t, httpEndpoint)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Acks == 0 {
		t.Fatal("nothing acked")
	}
}

// lying wraps the real endpoint and changes one thing.
type lying struct {
	sim.HTTPEndpoint
	answer func(status int, err error) int
	key    func(string) string
}

func (l lying) Prepare(ns, ct, key string, body []byte) (sim.HTTPPending, int) {
	if l.key != nil {
		key = l.key(key)
	}
	p, st := l.HTTPEndpoint.Prepare(ns, ct, key, body)
	if p == nil {
		return nil, st
	}
	return lyingPending{p, l.answer}, 0
}

type lyingPending struct {
	sim.HTTPPending
	answer func(status int, err error) int
}

func (p lyingPending) Answer(err error) int {
	st := p.HTTPPending.Answer(err)
	if p.answer != nil {
		return p.answer(st, err)
	}
	return st
}

// The oracles catch an endpoint that answers 200 for a unit the host did
// not ack, one that refuses a unit the host acked, and one that keys a
// request other than by its Idempotency-Key (a retry would be stored
// twice).
func TestHTTPEndpointOracles(t *testing.T) {
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
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runHTTPWorld(t, func(sink string, ready func() bool) sim.HTTPEndpoint {
				l := c.l
				l.HTTPEndpoint = httpEndpoint(sink, ready)
				return l
			})
			if !strings.Contains(strings.Join(res.Violations, "\n"), c.want) {
				t.Fatalf("violations %q, want one saying %q", res.Violations, c.want)
			}
		})
	}
}
