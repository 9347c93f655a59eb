package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// brokerURL is the MQTT broker the tests use (internal/brokertest).
func brokerURL(t *testing.T) string { return brokertest.MQTT(t) }

// publish publishes messages {"msg_id": "m{first+i}", "n": i} at QoS 1.
func publish(t *testing.T, url, topic string, first, n int) {
	t.Helper()
	cl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprint("pub-", time.Now().UnixNano())))
	if tok := cl.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer cl.Disconnect(100)
	for i := range n {
		tok := cl.Publish(topic, 1, false, fmt.Sprintf(`{"msg_id": "m%05d", "n": %d}`, first+i, first+i))
		if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
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
	t.Cleanup(func() {
		cl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(src.ClientID()).SetCleanSession(true))
		if tok := cl.Connect(); tok.WaitTimeout(3*time.Second) && tok.Error() == nil {
			cl.Disconnect(100)
		}
	})
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
	cl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprint("pub-", time.Now().UnixNano())))
	if tok := cl.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	tok := cl.Publish(topic, 1, false, `{"n": 1}`)
	tok.Wait()
	cl.Disconnect(100)
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
