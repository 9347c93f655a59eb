package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

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

// Run connects with the persistent session (Clean Start off, the
// Session Expiry Interval of Config.SessionExpiry), subscribes, and
// ingests every message until ctx ends (nil) or it fails: a
// *MessageError, the host refusing every unit, a broker refusing the
// subscription. A broker that cannot be reached is retried (autopaho
// reconnects and resumes the session; the broker sends again what was
// not acknowledged).
func (s *Source) Run(ctx context.Context, ingest IngestFunc) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("mqtt source %q: Run called while it runs", s.cfg.Name)
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	broker, err := url.Parse(s.cfg.Broker)
	if err != nil {
		return fmt.Errorf("mqtt source %q: broker %q: %w", s.cfg.Name, s.cfg.Broker, err)
	}
	r := &run{s: s, ctx: ctx, fail: cancel, ingest: ingest, slots: make(chan struct{}, s.cfg.InFlight)}
	expiry := uint32(s.cfg.SessionExpiry / time.Second)
	receiveMax := uint16(s.cfg.InFlight)
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{broker},
		KeepAlive:                     30,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         expiry,
		ReconnectBackoff:              autopaho.NewExponentialBackoff(250*time.Millisecond, 5*time.Second, time.Second, 1.5),
		ConnectTimeout:                10 * time.Second,
		ConnectPacketBuilder: func(cp *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			// The broker sends at most InFlight messages not yet
			// acknowledged (MQTT 5's Receive Maximum): backpressure.
			if cp.Properties == nil {
				cp.Properties = &paho.ConnectProperties{}
			}
			cp.Properties.ReceiveMaximum = &receiveMax
			return cp, nil
		},
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ca *paho.Connack) {
			s.cfg.Logger.Debug("mqtt source: connected", "source", s.cfg.Name, "session_present", ca.SessionPresent)
			go r.subscribe(cm)
		},
		OnConnectError: func(err error) {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("mqtt source: cannot connect; retrying", "source", s.cfg.Name, "broker", s.cfg.Broker, "error", err)
			}
		},
		ClientConfig: paho.ClientConfig{
			ClientID:                   s.ClientID(),
			EnableManualAcknowledgment: true,
			SendAcksInterval:           20 * time.Millisecond,
			OnPublishReceived:          []func(paho.PublishReceived) (bool, error){r.receive},
		},
	}
	if s.cfg.Username != "" || s.cfg.Password != "" {
		cfg.ConnectUsername = s.cfg.Username
		cfg.ConnectPassword = []byte(s.cfg.Password)
	}
	// The connection outlives ctx until the units in flight are answered.
	connCtx, connCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer connCancel()
	cm, err := autopaho.NewConnection(connCtx, cfg)
	if err != nil {
		return fmt.Errorf("mqtt source %q: %w", s.cfg.Name, err)
	}
	s.cfg.Logger.Info("mqtt source: starting", "source", s.cfg.Name, "broker", s.cfg.Broker, "topics", s.cfg.Topics,
		"client_id", s.ClientID(), "session_expiry", s.cfg.SessionExpiry, "exactly_once", s.cfg.IDField != "" || s.cfg.IDProperty != "")
	<-ctx.Done()
	// Units in flight finish (their answers come: ingest runs without
	// ctx's cancellation); none is acknowledged once ctx ended, so the
	// broker keeps and sends again whatever this run did not finish. No
	// unit starts once closed is set (paho may still hand on a message).
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	_ = cm.Disconnect(dctx)
	dcancel()
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
	msg  *paho.Publish
	cl   *paho.Client // the connection it came on: its PUBACK goes there
	done bool
}

// subscribe subscribes to the topic filters at QoS 1 on a new
// connection (a resumed session keeps them; subscribing again is
// harmless). A refusal stops the source.
func (r *run) subscribe(cm *autopaho.ConnectionManager) {
	sub := &paho.Subscribe{}
	for _, t := range r.s.cfg.Topics {
		sub.Subscriptions = append(sub.Subscriptions, paho.SubscribeOptions{Topic: t, QoS: 1})
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	sa, err := cm.Subscribe(ctx, sub)
	if err == nil {
		for i, rc := range sa.Reasons {
			if rc >= 0x80 {
				err = fmt.Errorf("reason code 0x%02x for %q", rc, r.s.cfg.Topics[min(i, len(r.s.cfg.Topics)-1)])
				break
			}
		}
	}
	if err != nil && r.ctx.Err() == nil {
		r.fail(fmt.Errorf("mqtt source %q: subscribe to %v: %w", r.s.cfg.Name, r.s.cfg.Topics, err))
	}
}

// receive takes a message from paho, in arrival order: it waits for a
// slot — paho then hands on no more: backpressure, besides the Receive
// Maximum — and ingests the message on a goroutine of its own.
func (r *run) receive(pr paho.PublishReceived) (bool, error) {
	msg := pr.Packet
	p := &pending{msg: msg, cl: pr.Client}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return true, nil
	}
	r.order = append(r.order, p)
	r.mu.Unlock()
	select {
	case r.slots <- struct{}{}:
	case <-r.ctx.Done():
		return true, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		<-r.slots
		return true, nil
	}
	r.wg.Go(func() {
		defer func() { <-r.slots }()
		if err := r.s.ingestMessage(r.ctx, r.ingest, msg); err != nil {
			r.fail(err)
			return
		}
		r.acked(p)
	})
	return true, nil
}

// acked marks p acked by the host and acknowledges, in arrival order,
// every message up to the first still waiting. A message of a
// connection since lost is acknowledged to nobody: the broker sends it
// again on the resumed session.
func (r *run) acked(p *pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.done = true
	for len(r.order) > 0 && r.order[0].done {
		if q := r.order[0]; r.ctx.Err() == nil && q.msg.QoS > 0 {
			_ = q.cl.Ack(q.msg) // ErrPacketNotFound: its connection was lost
		}
		r.order = r.order[1:]
	}
}

// ingestMessage makes msg a unit and ingests it until it is acked
// (sources.Submit: the very same unit again while the answer may
// change). nil: acked, or ctx ended first.
func (s *Source) ingestMessage(ctx context.Context, ingest IngestFunc, msg *paho.Publish) error {
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
				"topic", msg.Topic, "idempotency_key", u.IdempotencyKey, "retry_in", backoff, "error", err)
		}
	})
	switch a {
	case sources.Acked:
		s.messagesAcked.Add(1)
		return nil
	case sources.Invalid:
		err = &MessageError{Topic: msg.Topic, Reason: fmt.Sprintf("the host refuses it: %v", err)}
	case sources.Refuses:
		err = fmt.Errorf("mqtt source %q: the host refuses units: %w", s.cfg.Name, err)
	default:
		err = nil // stopped
	}
	s.messagesIngested.Add(^uint64(0)) // given up: no longer ingested
	return err
}

// unit is the unit of one message, with its id as the idempotency key
// when the source has an IDField or an IDProperty.
func (s *Source) unit(msg *paho.Publish) (engine.Unit, error) {
	topic := msg.Topic
	dec := messages.Decoder{Format: s.cfg.Format, Limits: s.cfg.Limits, Mem: s.cfg.Allocator, Meta: metaFields,
		AppendMeta: func(_ int, bs []array.Builder) { bs[0].(*array.StringBuilder).Append(topic) }}
	schema, batches, err := dec.Decode([][]byte{msg.Payload})
	if ve, ok := errors.AsType[*messages.ValueError](err); ok {
		return engine.Unit{}, &MessageError{Topic: topic, Reason: ve.Reason}
	}
	if err != nil {
		return engine.Unit{}, err
	}
	u := engine.Unit{Key: segment.PartitionKey{SinkRef: s.cfg.SinkRef, Namespace: s.cfg.Namespace, Partition: "0",
		Schema: segment.FingerprintOf(schema)}, Schema: schema, Batches: batches}
	if s.cfg.IDField != "" || s.cfg.IDProperty != "" {
		var id string
		var err error
		if s.cfg.IDField != "" {
			id, err = messageID(msg.Payload, s.cfg.IDField)
		} else {
			id, err = propertyID(msg.Properties, s.cfg.IDProperty)
		}
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
	if !validID(id) {
		return "", fmt.Errorf("id_field %q: id %.40q: want 1 to %d printable bytes", field, id, IDBytesMax)
	}
	return id, nil
}

// propertyID is the value of the user property name: 1..IDBytesMax
// printable bytes, and one value only (a message naming two ids is
// ambiguous).
func propertyID(props *paho.PublishProperties, name string) (string, error) {
	var vals []string
	if props != nil {
		vals = props.User.GetAll(name)
	}
	switch {
	case len(vals) == 0:
		return "", fmt.Errorf("id_property %q: the message has no such user property; exactly once needs every message to carry its id", name)
	case len(vals) > 1:
		return "", fmt.Errorf("id_property %q: the message has %d of them; want one", name, len(vals))
	}
	id := vals[0]
	if !validID(id) {
		return "", fmt.Errorf("id_property %q: id %.40q: want 1 to %d printable bytes", name, id, IDBytesMax)
	}
	return id, nil
}

func validID(id string) bool {
	return id != "" && len(id) <= IDBytesMax && !strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
