package main

import (
	"bytes"
	"fmt"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// httpEndpoint runs the real HTTP source's request handling in a world:
// sources/http's Handler, its Prepare and Answer — every check, the
// decoding of the body, the unit and its idempotency key, the mapping of
// the host's answer to a status — with the world's clients and host in
// place of net/http and storage.Host.
func httpEndpoint(sink string, ready func() bool) sim.HTTPEndpoint {
	h, err := httpsrc.New(httpsrc.Config{Name: "sim", DefaultSink: sink, Ready: ready}, nil)
	if err != nil {
		panic(fmt.Sprintf("simulate: the HTTP source refuses its configuration: %v", err))
	}
	return endpoint{h}
}

type endpoint struct{ h *httpsrc.Handler }

func (e endpoint) Prepare(ns, contentType, key string, body []byte) (sim.HTTPPending, int) {
	p, resp := e.h.Prepare(httpsrc.Request{
		Method: "POST", Path: httpsrc.IngestPath + ns, ContentType: contentType,
		ContentLength: int64(len(body)), IdempotencyKey: key, Body: bytes.NewReader(body),
	})
	if resp != nil {
		return nil, resp.Status
	}
	return pending{e.h, p}, 0
}

type pending struct {
	h *httpsrc.Handler
	p *httpsrc.Pending
}

func (p pending) Unit() engine.Unit    { return p.p.Unit() }
func (p pending) Release()             { p.p.Release() }
func (p pending) Answer(err error) int { return p.h.Answer(p.p, err).Status }
