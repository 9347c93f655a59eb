package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
	"github.com/skipprd/skipprd/sources/messages"
)

// IngestFunc submits a unit and blocks until it is answered: nil means
// committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// ColTopic is the column of each row's topic.
const ColTopic = "_mqtt_topic"

var metaFields = []arrow.Field{{Name: ColTopic, Type: arrow.BinaryTypes.String}}

// MessageError is a message that cannot become a row: Run returns it,
// and the message is never acknowledged, so the broker keeps it.
type MessageError struct {
	Topic  string
	Reason string
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("mqtt: a message of topic %q: %s", e.Topic, e.Reason)
}

// Source subscribes to topic filters at QoS 1 in a persistent session
// and hands each message to the host as a unit; the broker's PUBACK
// goes only after the host acked it.
type Source struct {
	cfg     Config
	running atomic.Bool

	messagesIngested, messagesAcked, retries atomic.Uint64
}

// New returns a source for cfg, or an error naming what is wrong with it.
func New(cfg Config) (*Source, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg}, nil
}

// ClientID is the source's MQTT client id: its session on the broker.
func (s *Source) ClientID() string { return "skipprd-" + s.cfg.Name }

// Stats are a source's counters since New.
type Stats struct {
	MessagesIngested uint64 // messages handed to the host, acked or awaiting their answer
	MessagesAcked    uint64 // messages the host acked (and the source then acknowledged)
	Retries          uint64 // resubmissions of a unit
}

// Stats returns the counters. Safe from any goroutine.
func (s *Source) Stats() Stats {
	return Stats{MessagesIngested: s.messagesIngested.Load(), MessagesAcked: s.messagesAcked.Load(), Retries: s.retries.Load()}
}

// Run connects with the persistent session, subscribes, and ingests
// every message until ctx ends (nil) or it fails: a *MessageError, the
// host refusing every unit, a broker refusing the subscription. A broker
// that cannot be reached is retried (paho reconnects and resumes the
// session; the broker sends again what was not acknowledged).
func (s *Source) Run(ctx context.Context, ingest IngestFunc) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("mqtt source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run{s: s, ctx: ctx, fail: cancel, ingest: ingest, slots: make(chan struct{}, s.cfg.InFlight)}
	opts := paho.NewClientOptions().AddBroker(s.cfg.Broker).SetClientID(s.ClientID()).
		SetCleanSession(false).SetAutoAckDisabled(true).SetOrderMatters(true).SetResumeSubs(true).
		SetConnectRetry(true).SetAutoReconnect(true).SetUsername(s.cfg.Username).SetPassword(s.cfg.Password).
		SetDefaultPublishHandler(r.receive)
	opts.SetOnConnectHandler(func(c paho.Client) { r.subscribe(c) })
	cl := paho.NewClient(opts)
	tok := cl.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
	}
	s.cfg.Logger.Info("mqtt source: starting", "source", s.cfg.Name, "broker", s.cfg.Broker, "topics", s.cfg.Topics,
		"client_id", s.ClientID(), "exactly_once", s.cfg.IDField != "")
	<-ctx.Done()
	// Units in flight finish (their answers come: ingest runs without
	// ctx's cancellation); none is acknowledged once ctx ended, so the
	// broker keeps and sends again whatever this run did not finish. No
	// unit starts once closed is set (paho may still hand on a message).
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	cl.Disconnect(250)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// run is one Run's state.
type run struct {
	s      *Source
	ctx    context.Context
	fail   context.CancelCauseFunc
	ingest IngestFunc
	slots  chan struct{} // InFlight: units awaiting an answer
	wg     sync.WaitGroup

	// order: the messages received and not yet acknowledged, in arrival
	// order; PUBACKs go in that order (MQTT's rule for QoS 1). closed:
	// Run stopped taking messages; wg gets no Add after it is set.
	mu     sync.Mutex
	order  []*pending
	closed bool
}

type pending struct {
	msg  paho.Message
	done bool
}

func (r *run) subscribe(c paho.Client) {
	filters := map[string]byte{}
	for _, t := range r.s.cfg.Topics {
		filters[t] = 1
	}
	tok := c.SubscribeMultiple(filters, nil)
	go func() {
		tok.Wait()
		if err := tok.Error(); err != nil {
			r.fail(fmt.Errorf("mqtt source %q: subscribe to %v: %w", r.s.cfg.Name, r.s.cfg.Topics, err))
		}
	}()
}

// receive takes a message from paho, in arrival order (OrderMatters):
// it waits for a slot — paho then stops handing on messages:
// backpressure — and ingests the message on a goroutine of its own.
func (r *run) receive(_ paho.Client, msg paho.Message) {
	p := &pending{msg: msg}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.order = append(r.order, p)
	r.mu.Unlock()
	select {
	case r.slots <- struct{}{}:
	case <-r.ctx.Done():
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		<-r.slots
		return
	}
	r.wg.Go(func() {
		defer func() { <-r.slots }()
		if err := r.s.ingestMessage(r.ctx, r.ingest, msg); err != nil {
			r.fail(err)
			return
		}
		r.acked(p)
	})
}

// acked marks p acked by the host and acknowledges, in arrival order,
// every message up to the first still waiting.
func (r *run) acked(p *pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.done = true
	for len(r.order) > 0 && r.order[0].done {
		if r.ctx.Err() == nil {
			r.order[0].msg.Ack()
		}
		r.order = r.order[1:]
	}
}

// ingestMessage makes msg a unit and ingests it until it is acked
// (sources.Submit: the very same unit again while the answer may
// change). nil: acked, or ctx ended first.
func (s *Source) ingestMessage(ctx context.Context, ingest IngestFunc, msg paho.Message) error {
	u, err := s.unit(msg)
	if err != nil {
		return err
	}
	defer messages.ReleaseAll(u.Batches)
	s.messagesIngested.Add(1)
	a, err := sources.Submit(ctx, ingest, u, sources.Sleep, func(a sources.Answer, backoff time.Duration, err error) {
		s.retries.Add(1)
		if a == sources.Unknown {
			s.cfg.Logger.Warn("mqtt source: ingest failed; retrying the same unit", "source", s.cfg.Name,
				"topic", msg.Topic(), "idempotency_key", u.IdempotencyKey, "retry_in", backoff, "error", err)
		}
	})
	switch a {
	case sources.Acked:
		s.messagesAcked.Add(1)
		return nil
	case sources.Invalid:
		err = &MessageError{Topic: msg.Topic(), Reason: fmt.Sprintf("the host refuses it: %v", err)}
	case sources.Refuses:
		err = fmt.Errorf("mqtt source %q: the host refuses units: %w", s.cfg.Name, err)
	default:
		err = nil // stopped
	}
	s.messagesIngested.Add(^uint64(0)) // given up: no longer ingested
	return err
}

// unit is the unit of one message (Unit).
func (s *Source) unit(msg paho.Message) (engine.Unit, error) {
	return s.Unit(msg.Topic(), msg.Payload())
}

// Unit is the unit of the message payload received on topic, with its id
// as the idempotency key when the source has an IDField: a *MessageError
// when it cannot be a row or has no id. Run uses it; it is exported so
// that the simulator (cmd/simulate) can drive it on its loop, the
// client (paho) not run there. The caller releases the unit's batches.
func (s *Source) Unit(topic string, payload []byte) (engine.Unit, error) {
	dec := messages.Decoder{Format: s.cfg.Format, Limits: s.cfg.Limits, Mem: s.cfg.Allocator, Meta: metaFields,
		AppendMeta: func(_ int, bs []array.Builder) { bs[0].(*array.StringBuilder).Append(topic) }}
	schema, batches, err := dec.Decode([][]byte{payload})
	if ve, ok := errors.AsType[*messages.ValueError](err); ok {
		return engine.Unit{}, &MessageError{Topic: topic, Reason: ve.Reason}
	}
	if err != nil {
		return engine.Unit{}, err
	}
	u := engine.Unit{Key: segment.PartitionKey{SinkRef: s.cfg.SinkRef, Namespace: s.cfg.Namespace, Partition: "0",
		Schema: segment.FingerprintOf(schema)}, Schema: schema, Batches: batches}
	if s.cfg.IDField != "" {
		id, err := messageID(payload, s.cfg.IDField)
		if err != nil {
			messages.ReleaseAll(batches)
			return engine.Unit{}, &MessageError{Topic: topic, Reason: err.Error()}
		}
		u.IdempotencyKey = "mqtt/" + s.cfg.Name + "/" + id
	}
	return u, nil
}

// messageID is the value of field in a JSON object: a string as it is,
// a number as written; 1..IDBytesMax printable bytes.
func messageID(payload []byte, field string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return "", fmt.Errorf("id_field %q: the value is not a JSON object: %v", field, err)
	}
	raw, ok := obj[field]
	if !ok {
		return "", fmt.Errorf("id_field %q: the message has no such field; exactly once needs every message to carry its id", field)
	}
	id := string(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		id = s
	}
	if id == "" || len(id) > IDBytesMax || strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("id_field %q: id %.40q: want 1 to %d printable bytes", field, id, IDBytesMax)
	}
	return id, nil
}
