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
// the host's answer to a status and a row count — with the world's
// clients and host in place of net/http and storage.Host, and the
// world's body cap if it draws one.
func httpEndpoint(opt sim.HTTPOptions) sim.HTTPEndpoint {
	cfg := httpsrc.Config{Name: "sim", DefaultSink: opt.Sink, Ready: opt.Ready}
	if opt.BodyCap > 0 {
		cfg.Limits = httpsrc.DefaultLimits()
		cfg.Limits.BodyBytes = opt.BodyCap
	}
	h, err := httpsrc.New(cfg, nil)
	if err != nil {
		panic(fmt.Sprintf("simulate: the HTTP source refuses its configuration: %v", err))
	}
	return endpoint{h}
}

type endpoint struct{ h *httpsrc.Handler }

func (e endpoint) Prepare(ns, contentType, key string, length int64, body []byte) (sim.HTTPPending, int) {
	p, resp := e.h.Prepare(httpsrc.Request{
		Method: "POST", Path: httpsrc.IngestPath + ns, ContentType: contentType,
		ContentLength: length, IdempotencyKey: key, Body: bytes.NewReader(body),
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

func (p pending) Unit() engine.Unit { return p.p.Unit() }
func (p pending) Release()          { p.p.Release() }

// Answer is the response's status and, with a 200, the row count its
// body states (-1 if it states none).
func (p pending) Answer(err error) (int, int64) {
	resp := p.h.Answer(p.p, err)
	rows, ok := resp.Body["rows"].(int64)
	if !ok {
		rows = -1
	}
	return resp.Status, rows
}
