package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/eclipse/paho.golang/paho"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// brokerURL is the MQTT broker the tests use (internal/brokertest).
func brokerURL(t *testing.T) string { return brokertest.MQTT(t) }

// dial connects an MQTT 5 client to url with clientID; cleanStart
// discards a session the broker holds for it.
func dial(t *testing.T, rawURL, clientID string, cleanStart bool) *paho.Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	cl := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Connect(ctx, &paho.Connect{ClientID: clientID, CleanStart: cleanStart, KeepAlive: 30}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cl
}

func disconnect(cl *paho.Client) { _ = cl.Disconnect(&paho.Disconnect{ReasonCode: 0}) }

// publishEach publishes payloads at QoS 1, each with the user
// properties props(i) (nil: none).
func publishEach(t *testing.T, url, topic string, payloads []string, props func(i int) paho.UserProperties) {
	t.Helper()
	cl := dial(t, url, fmt.Sprint("pub-", time.Now().UnixNano()), true)
	defer disconnect(cl)
	for i, p := range payloads {
		pb := &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(p)}
		if props != nil {
			pb.Properties = &paho.PublishProperties{User: props(i)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cl.Publish(ctx, pb)
		cancel()
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

// publish publishes messages {"msg_id": "m{first+i}", "n": i} at QoS 1.
func publish(t *testing.T, url, topic string, first, n int) {
	t.Helper()
	payloads := make([]string, n)
	for i := range n {
		payloads[i] = fmt.Sprintf(`{"msg_id": "m%05d", "n": %d}`, first+i, first+i)
	}
	publishEach(t, url, topic, payloads, nil)
}

// testHost acks a unit by recording its message id; a unit whose
// idempotency key it holds is acked without recording it again, as the
// engine does. afterCommit, if set, may answer an error after recording
// (committed, not acked: a crash).
type testHost struct {
	t           *testing.T
	mu          sync.Mutex
	keys        map[string]bool
	ids         []string
	units       int
	afterCommit func(n int) error
}

func (h *testHost) ingest(_ context.Context, u engine.Unit) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.units++
	if u.IdempotencyKey != "" && h.keys[u.IdempotencyKey] {
		return nil
	}
	if h.keys == nil {
		h.keys = map[string]bool{}
	}
	h.keys[u.IdempotencyKey] = true
	for _, b := range u.Batches {
		idx := b.Schema().FieldIndices("msg_id")
		h.ids = append(h.ids, b.Column(idx[0]).(*array.String).Value(0))
	}
	if h.afterCommit != nil {
		return h.afterCommit(h.units)
	}
	return nil
}

func (h *testHost) recorded() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

func runUntil(t *testing.T, src *Source, h *testHost, cond func() bool) error {
	t.Helper()
	return brokertest.RunUntil(t, func(ctx context.Context) error { return src.Run(ctx, h.ingest) }, cond,
		func() string { return fmt.Sprintf("%d messages recorded", h.recorded()) })
}

// endSession ends the source's persistent session on the broker at the
// end of the test: a connect with a clean session discards it.
func endSession(t *testing.T, url string, src *Source) {
	t.Cleanup(func() { disconnect(dial(t, url, src.ClientID(), true)) })
}

func testConfig(url, topic string, logs *logbuf.Buffer) Config {
	return Config{Name: fmt.Sprint("t", time.Now().UnixNano()), Broker: url, Topics: []string{topic}, Namespace: "events",
		SinkRef: "lake", IDField: "msg_id", InFlight: 8, Logger: slog.New(slog.NewTextHandler(logs, nil))}
}

// A crash after some messages were committed but before the broker got
// their acknowledgement: the persistent session sends them again, and
// their ids make the host store each once.
func TestRedeliveredMessagesAreStoredOnceByTheirIDs(t *testing.T) {
	url := brokerURL(t)
	topic := fmt.Sprintf("skipprd-test/%d/orders", time.Now().UnixNano())
	var logs logbuf.Buffer
	cfg := testConfig(url, topic, &logs)
	h := &testHost{t: t}
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	endSession(t, url, src)
	// Subscribe once (the session is created), then publish.
	_ = runUntil(t, src, h, func() bool { return true })
	publish(t, url, topic, 0, 300)
	h.afterCommit = func(n int) error {
		if n > 50 {
			return errors.New("the daemon was killed")
		}
		return nil
	}
	_ = runUntil(t, src, h, func() bool { return h.recorded() >= 100 })
	h.afterCommit = nil
	src2, _ := New(cfg)
	if err := runUntil(t, src2, h, func() bool { return h.recorded() >= 300 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // nothing more comes
	ids := slices.Clone(h.ids)
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != 300 || len(ids) != 300 || ids[0] != "m00000" || ids[299] != "m00299" {
		t.Fatalf("%d messages recorded (%v…), want m00000..m00299 once each", len(ids), ids[:min(5, len(ids))])
	}
	if st := src2.Stats(); st.MessagesIngested != st.MessagesAcked || st.MessagesAcked == 0 {
		t.Errorf("stats %+v: every message handed over was acked once the run stopped", st)
	}
	if h.units <= 300 {
		t.Errorf("%d units for 300 messages: the crash should have left some to be delivered again", h.units)
	}
}

func TestAMessageWithoutItsIDStopsTheSource(t *testing.T) {
	url := brokerURL(t)
	topic := fmt.Sprintf("skipprd-test/%d/bad", time.Now().UnixNano())
	var logs logbuf.Buffer
	cfg := testConfig(url, topic, &logs)
	h := &testHost{t: t}
	src, _ := New(cfg)
	endSession(t, url, src)
	_ = runUntil(t, src, h, func() bool { return true })
	publishEach(t, url, topic, []string{`{"n": 1}`}, nil)
	err := runUntil(t, src, h, func() bool { return false })
	var me *MessageError
	if !errors.As(err, &me) || me.Topic != topic || !strings.Contains(err.Error(), `id_field "msg_id"`) {
		t.Fatalf("Run: %v; want the message without msg_id named", err)
	}
}

func TestMessageIDs(t *testing.T) {
	for payload, want := range map[string]string{`{"id":"a-1"}`: "a-1", `{"id":42}`: "42", `{"id":"x\ny"}`: "", `{"n":1}`: "", `[1]`: ""} {
		got, err := messageID([]byte(payload), "id")
		if got != want || (want == "") != (err != nil) {
			t.Errorf("messageID(%s) = %q, %v; want %q", payload, got, err, want)
		}
	}
}

// A message whose id is an MQTT 5 user property, published twice (a
// publisher's retry): the host stores it once. A message without the
// property stops the source.
func TestUserPropertyIDsStoreARepublishedMessageOnce(t *testing.T) {
	url := brokerURL(t)
	topic := fmt.Sprintf("skipprd-test/%d/props", time.Now().UnixNano())
	var logs logbuf.Buffer
	cfg := testConfig(url, topic, &logs)
	cfg.IDField, cfg.IDProperty = "", "message-id"
	h := &testHost{t: t}
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	endSession(t, url, src)
	_ = runUntil(t, src, h, func() bool { return true }) // the session and its subscription
	ids := []string{"x1", "x1", "x2"}
	payloads := []string{`{"msg_id": "x1", "n": 1}`, `{"msg_id": "x1", "n": 1}`, `{"msg_id": "x2", "n": 2}`}
	publishEach(t, url, topic, payloads, func(i int) paho.UserProperties {
		return paho.UserProperties{{Key: "trace", Value: "t"}, {Key: "message-id", Value: ids[i]}}
	})
	done := func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.units >= 3 }
	if err := runUntil(t, src, h, done); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(h.ids)); !slices.Equal(got, []string{"x1", "x2"}) || h.units != 3 {
		t.Fatalf("recorded %v in %d units; want x1, x2 once each of 3 units", got, h.units)
	}
	if _, ok := h.keys["mqtt/"+cfg.Name+"/x1"]; !ok {
		t.Errorf("keys %v: want mqtt/%s/x1", h.keys, cfg.Name)
	}
	publishEach(t, url, topic, []string{`{"msg_id": "x3"}`}, nil)
	err = runUntil(t, src, h, func() bool { return false })
	var me *MessageError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), `id_property "message-id"`) {
		t.Fatalf("Run: %v; want the message without the property named", err)
	}
}

// Messages published while the source is down wait in its persistent
// session and arrive when it starts again.
func TestARestartResumesThePersistentSession(t *testing.T) {
	url := brokerURL(t)
	topic := fmt.Sprintf("skipprd-test/%d/resume", time.Now().UnixNano())
	var logs logbuf.Buffer
	cfg := testConfig(url, topic, &logs)
	h := &testHost{t: t}
	src, _ := New(cfg)
	endSession(t, url, src)
	publish(t, url, topic, 0, 10)
	_ = runUntil(t, src, h, func() bool { return true })
	if h.recorded() != 0 {
		t.Fatalf("%d messages published before the session existed arrived", h.recorded())
	}
	publish(t, url, topic, 10, 40) // the source is down
	src2, _ := New(cfg)
	if err := runUntil(t, src2, h, func() bool { return h.recorded() >= 40 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if ids := slices.Sorted(slices.Values(h.ids)); len(ids) != 40 || ids[0] != "m00010" || ids[39] != "m00049" {
		t.Fatalf("%d messages recorded (%v…), want m00010..m00049", len(ids), ids[:min(3, len(ids))])
	}
}

// The Session Expiry Interval is the one asked for: a session of 1 s is
// gone after the source was down for longer, and what was published
// meanwhile is not delivered.
func TestAnExpiredSessionIsGone(t *testing.T) {
	url := brokerURL(t)
	topic := fmt.Sprintf("skipprd-test/%d/expiry", time.Now().UnixNano())
	var logs logbuf.Buffer
	cfg := testConfig(url, topic, &logs)
	cfg.SessionExpiry = time.Second
	h := &testHost{t: t}
	src, _ := New(cfg)
	endSession(t, url, src)
	_ = runUntil(t, src, h, func() bool { return true })
	time.Sleep(3 * time.Second)
	publish(t, url, topic, 0, 5)
	src2, _ := New(cfg)
	_ = runUntil(t, src2, h, func() bool { return true })
	time.Sleep(300 * time.Millisecond)
	if n := h.recorded(); n != 0 {
		t.Fatalf("%d messages arrived though the session expired", n)
	}
}

func TestConfigChecks(t *testing.T) {
	base := Config{Name: "a", Broker: "tcp://127.0.0.1:1883", Topics: []string{"t/#"}, Namespace: "events", SinkRef: "lake"}
	src, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if src.cfg.SessionExpiry != DefaultSessionExpiry || src.cfg.IDField != "" || src.cfg.IDProperty != "" {
		t.Errorf("defaults %+v", src.cfg)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		want string // "": valid
	}{
		{func(c *Config) { c.SessionExpiry = 90 * time.Second }, ""},
		{func(c *Config) { c.SessionExpiry = SessionExpiryMax }, ""},
		{func(c *Config) { c.SessionExpiry = -time.Second }, "session_expiry -1s"},
		{func(c *Config) { c.SessionExpiry = 500 * time.Millisecond }, "session_expiry 500ms"},
		{func(c *Config) { c.SessionExpiry = 1500 * time.Millisecond }, "whole seconds"},
		{func(c *Config) { c.SessionExpiry = SessionExpiryMax + time.Second }, "session_expiry"},
		{func(c *Config) { c.IDField, c.IDProperty = "id", "id" }, "at most one"},
		{func(c *Config) { c.IDProperty, c.Format = "id", FormatText }, ""},
		{func(c *Config) { c.Broker = "127.0.0.1:1883" }, "broker"},
		{func(c *Config) { c.Broker = "http://x:1883" }, "broker"},
		{func(c *Config) { c.Broker = "mqtt://x:1883" }, ""},
	} {
		c := base
		tc.mod(&c)
		_, err := New(c)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v; want %q", c, err, tc.want)
		}
	}
}

func TestPropertyIDs(t *testing.T) {
	for _, tc := range []struct {
		props *paho.PublishProperties
		want  string
	}{
		{&paho.PublishProperties{User: paho.UserProperties{{Key: "id", Value: "a-1"}}}, "a-1"},
		{&paho.PublishProperties{User: paho.UserProperties{{Key: "id", Value: "a"}, {Key: "id", Value: "b"}}}, ""},
		{&paho.PublishProperties{User: paho.UserProperties{{Key: "id", Value: "x\ny"}}}, ""},
		{&paho.PublishProperties{User: paho.UserProperties{{Key: "other", Value: "a"}}}, ""},
		{nil, ""},
	} {
		got, err := propertyID(tc.props, "id")
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("propertyID(%+v) = %q, %v; want %q", tc.props, got, err, tc.want)
		}
	}
}
