package httpsrc

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
)

// IngestPath is the route of the ingest endpoint; {namespace} is its
// last segment.
const IngestPath = "/v1/ingest/"

// IdempotencyKeyMax bounds an Idempotency-Key header, bytes.
const IdempotencyKeyMax = 255

// retryAfter is the Retry-After of 429 and 503 answers: admission frees
// room within a flush or two, and recovery takes seconds.
const retryAfter = time.Second

// IngestFunc hands a unit to the host and blocks until it is answered:
// nil means committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// Namespace is how one namespace is ingested.
type Namespace struct {
	Sink string
	// AtLeastOnce: requests without an Idempotency-Key are accepted; a
	// client's retry of such a request may be stored twice.
	AtLeastOnce bool
}

// Config configures a Handler.
type Config struct {
	// Name is the source's name in logs.
	Name string
	// Namespaces lists the accepted namespaces; with DefaultSink set,
	// any other valid namespace is accepted too, into DefaultSink,
	// with an Idempotency-Key required.
	Namespaces  map[string]Namespace
	DefaultSink string
	// Token, if not empty, is the bearer token every request must carry.
	Token  string
	Limits Limits
	Logger *slog.Logger
	// Ready reports whether the host has finished recovery; until then
	// requests are answered 503. Nil means always ready.
	Ready func() bool
}

// Handler is the HTTP ingest source: POST /v1/ingest/{namespace}.
// Checking and decoding a request (Prepare) and answering it (Answer)
// are separate from handing its unit to the host, so the simulator runs
// the same code with its own clients and host.
type Handler struct {
	cfg    Config
	ingest IngestFunc
	mem    memory.Allocator
}

// New returns a Handler that hands units to ingest.
func New(cfg Config, ingest IngestFunc) (*Handler, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	for ns := range cfg.Namespaces {
		if err := sources.CheckNamespace(ns); err != nil {
			return nil, fmt.Errorf("http source %s: %w", cfg.Name, err)
		}
	}
	return &Handler{cfg: cfg, ingest: ingest, mem: memory.DefaultAllocator}, nil
}

// Request is what Prepare needs of an HTTP request.
type Request struct {
	Method         string
	Path           string
	Authorization  string
	ContentType    string
	ContentLength  int64 // -1 if unknown
	IdempotencyKey string
	Body           io.Reader
}

// Response is an answer: its status, an optional Retry-After, and a JSON
// body.
type Response struct {
	Status     int
	RetryAfter time.Duration
	Body       map[string]any
}

// Pending is a request that passed every check: its unit is ready for
// the host.
type Pending struct {
	Namespace string
	Key       string // the client's Idempotency-Key, "" if none
	Rows      int64
	unit      engine.Unit
	decoded   *Decoded
}

// Unit returns the unit to hand to the host.
func (p *Pending) Unit() engine.Unit { return p.unit }

// Release drops the decoded batches; the host keeps its own references.
func (p *Pending) Release() { p.decoded.Release() }

// Prepare checks and decodes a request. It returns either a Pending
// unit or the answer that refuses the request; a refused request
// changes nothing.
func (h *Handler) Prepare(r Request) (*Pending, *Response) {
	if resp := h.checkHead(r); resp != nil {
		return nil, resp
	}
	ns := strings.TrimPrefix(r.Path, IngestPath)
	nc, resp := h.namespace(ns)
	if resp != nil {
		return nil, resp
	}
	format, err := FormatOf(r.ContentType)
	if err != nil {
		return nil, refuse(http.StatusUnsupportedMediaType, err.Error())
	}
	key, resp := idempotencyKey(r.IdempotencyKey, nc.AtLeastOnce)
	if resp != nil {
		return nil, resp
	}
	if r.ContentLength > h.cfg.Limits.BodyBytes {
		return nil, tooLarge(h.cfg.Limits.BodyBytes)
	}
	d, err := Decode(format, r.Body, h.cfg.Limits, h.mem)
	if err != nil {
		return nil, h.decodeError(err)
	}
	return &Pending{Namespace: ns, Key: key, Rows: d.Rows, decoded: d, unit: engine.Unit{
		Key: segment.PartitionKey{SinkRef: nc.Sink, Namespace: ns, Partition: "0",
			Schema: segment.FingerprintOf(d.Schema)},
		Schema:         d.Schema,
		Batches:        d.Batches,
		IdempotencyKey: engineKey(ns, key),
	}}, nil
}

// checkHead answers a request refused by its method, path or token.
func (h *Handler) checkHead(r Request) *Response {
	switch {
	case !strings.HasPrefix(r.Path, IngestPath):
		return refuse(http.StatusNotFound, fmt.Sprintf("no such endpoint %q; POST %s{namespace}", r.Path, IngestPath))
	case r.Method != http.MethodPost:
		return refuse(http.StatusMethodNotAllowed, fmt.Sprintf("%s: use POST", r.Method))
	case h.cfg.Token != "" && !bearerMatches(r.Authorization, h.cfg.Token):
		return refuse(http.StatusUnauthorized, "missing or wrong bearer token (Authorization: Bearer …)")
	case h.cfg.Ready != nil && !h.cfg.Ready():
		resp := refuse(http.StatusServiceUnavailable, "recovering the write-ahead log; retry shortly")
		resp.RetryAfter = retryAfter
		return resp
	}
	return nil
}

func bearerMatches(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// namespace resolves ns to its configuration.
func (h *Handler) namespace(ns string) (Namespace, *Response) {
	if err := sources.CheckNamespace(ns); err != nil {
		return Namespace{}, refuse(http.StatusBadRequest, err.Error())
	}
	if nc, ok := h.cfg.Namespaces[ns]; ok {
		return nc, nil
	}
	if h.cfg.DefaultSink == "" {
		return Namespace{}, refuse(http.StatusNotFound, fmt.Sprintf("namespace %q is not configured for source %s", ns, h.cfg.Name))
	}
	return Namespace{Sink: h.cfg.DefaultSink}, nil
}

// idempotencyKey checks the Idempotency-Key header: 1..255 printable
// ASCII characters, required unless the namespace is at-least-once.
func idempotencyKey(k string, atLeastOnce bool) (string, *Response) {
	switch {
	case k == "" && atLeastOnce:
		return "", nil
	case k == "":
		return "", refuse(http.StatusBadRequest, "Idempotency-Key header is required (a unique key per request, reused on retries)")
	case len(k) > IdempotencyKeyMax:
		return "", refuse(http.StatusBadRequest, fmt.Sprintf("Idempotency-Key is %d bytes long; at most %d", len(k), IdempotencyKeyMax))
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", refuse(http.StatusBadRequest, fmt.Sprintf("Idempotency-Key has byte 0x%02x at %d: printable ASCII only", k[i], i))
		}
	}
	return k, nil
}

// engineKey scopes a client's key to its namespace: the same key sent to
// two namespaces is two requests.
func engineKey(ns, key string) string {
	if key == "" {
		return ""
	}
	return "http/" + ns + "/" + key
}

func (h *Handler) decodeError(err error) *Response {
	var in *InputError
	switch {
	case errors.Is(err, ErrTooLarge):
		return tooLarge(h.cfg.Limits.BodyBytes)
	case errors.As(err, &in):
		resp := refuse(http.StatusBadRequest, in.Error())
		if in.Line > 0 {
			resp.Body["line"] = in.Line
		}
		if in.Column != "" {
			resp.Body["field"] = in.Column
		}
		return resp
	}
	return refuse(http.StatusBadRequest, err.Error())
}

func tooLarge(limit int64) *Response {
	return refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", limit))
}

func refuse(status int, msg string) *Response {
	return &Response{Status: status, Body: map[string]any{"error": msg}}
}

// Answer turns the host's answer to p's unit into the response: 200
// only when the unit is committed (err == nil). A retry of a committed
// key is answered 200 again without being stored twice.
func (h *Handler) Answer(p *Pending, err error) *Response {
	if err == nil {
		body := map[string]any{"rows": p.Rows, "namespace": p.Namespace}
		if p.Key != "" {
			body["idempotency_key"] = p.Key
		}
		return &Response{Status: http.StatusOK, Body: body}
	}
	switch {
	case errors.Is(err, engine.ErrResourceExhausted):
		resp := refuse(http.StatusTooManyRequests, "ingest is full (backpressure); retry after the Retry-After delay")
		resp.RetryAfter = retryAfter
		return resp
	case errors.Is(err, engine.ErrInvalidUnit):
		return refuse(http.StatusBadRequest, err.Error())
	}
	// Not ready, closed, outcome unknown, or the wait cut short: the unit
	// may or may not be committed. A retry with the same key is safe.
	h.cfg.Logger.Warn("ingest not acked", "source", h.cfg.Name, "namespace", p.Namespace, "err", err)
	resp := refuse(http.StatusServiceUnavailable, "not committed: "+err.Error()+"; retry with the same Idempotency-Key")
	resp.RetryAfter = retryAfter
	return resp
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{
		Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"),
		ContentType: r.Header.Get("Content-Type"), ContentLength: r.ContentLength,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Body:           http.MaxBytesReader(w, r.Body, h.cfg.Limits.BodyBytes+1),
	}
	p, resp := h.Prepare(req)
	if resp == nil {
		err := h.ingest(r.Context(), p.Unit())
		p.Release()
		resp = h.Answer(p, err)
	}
	write(w, resp)
}

func write(w http.ResponseWriter, resp *Response) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	if resp.RetryAfter > 0 {
		hdr.Set("Retry-After", strconv.Itoa(int((resp.RetryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(resp.Status)
	b, err := json.Marshal(resp.Body) // maps marshal in key order
	if err != nil {
		b = []byte(`{"error":"answer not encodable"}`)
	}
	_, _ = w.Write(append(b, '\n'))
}
