package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// topic_regex reads every topic whose whole name matches — those there
// at the start and one created while the source runs — and nothing of
// a topic that does not match, nor of one with Kafka's internal "__"
// prefix even when the regex matches it.
func TestTopicRegexReadsMatchingTopicsAndOnesCreatedLater(t *testing.T) {
	c := cluster(t, 1, "shop.orders", 2, kfake.SeedTopics(2, "shop.refunds", "old.shop.orders", "__shop.audit"))
	for _, topic := range []string{"shop.orders", "shop.refunds", "old.shop.orders", "__shop.audit"} {
		produce(t, c, topic, 0, 100, nil)
	}
	var logs logbuf.Buffer
	cfg := testConfig(c, "", &logs)
	cfg.Topics, cfg.TopicRegex = nil, `(__)?shop\..*`
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	namespaces := map[string]bool{}
	adm := admin(t, c)
	created := false
	h.onUnit = func(n int, u engine.Unit) error {
		namespaces[u.Key.Namespace] = true
		if !created && n >= 2 {
			created = true
			go func() {
				if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "shop.returns"); err != nil {
					t.Error(err)
					return
				}
				produce(t, c, "shop.returns", 0, 300, nil)
			}()
		}
		return nil
	}
	if err := runUntil(t, src, h, func() bool { return h.recorded() >= 500 }); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"shop.orders", "shop.refunds", "shop.returns"} {
		wantAll(t, h, topic, endOffsets(t, adm, topic))
	}
	for p := range h.offsetsOf() {
		if p.topic != "shop.orders" && p.topic != "shop.refunds" && p.topic != "shop.returns" {
			t.Errorf("topic %q was read; it does not match, or is internal", p.topic)
		}
	}
	if h.recorded() != 500 {
		t.Errorf("%d rows recorded, want 500", h.recorded())
	}
	for _, ns := range []string{"shop_orders", "shop_refunds", "shop_returns"} {
		if !namespaces[ns] {
			t.Errorf("no unit went to namespace %q (got %v)", ns, namespaces)
		}
	}
}

// Two matching topics that would go to one namespace stop the source,
// naming both: never one table of two topics' rows by accident.
func TestTopicRegexTopicsOfOneNamespaceStopTheSource(t *testing.T) {
	c := cluster(t, 1, "shop.a-b", 1, kfake.SeedTopics(1, "shop.a_b"))
	var logs logbuf.Buffer
	cfg := testConfig(c, "", &logs)
	cfg.Topics, cfg.TopicRegex = nil, `shop\..*`
	src, _ := New(cfg)
	err := runUntil(t, src, newHost(t), func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), `"shop.a-b"`) || !strings.Contains(err.Error(), `"shop.a_b"`) ||
		!strings.Contains(err.Error(), `namespace "shop_a_b"`) {
		t.Fatalf("Run: %v; want both topics and their namespace named", err)
	}
}

func TestTopicRegexMatchesWholeNames(t *testing.T) {
	re, err := CompileTopicRegex(`shop\..*`)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{"shop.orders": true, "old.shop.orders": false, "shop": false, "shopXorders": false} {
		if got := re.MatchString(topic); got != want {
			t.Errorf("%q matched: %v, want %v", topic, got, want)
		}
	}
}

func TestConfigTopicsGroupErrorsNameTheKey(t *testing.T) {
	base := Config{Name: "events", Brokers: []string{"k:9092"}, SinkRef: "lake"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"neither", func(c *Config) {}, "topics or topic_regex: one is required"},
		{"both", func(c *Config) { c.Topics, c.TopicRegex = []string{"a"}, "a.*" }, "topics and topic_regex: give one, not both"},
		{"bad regex", func(c *Config) { c.TopicRegex = "shop.(" }, `topic_regex "shop.(": error parsing regexp`},
		{"group with a space", func(c *Config) { c.Topics, c.Group = []string{"a"}, "my group" }, `group "my group": character ' '`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want %q", err, tc.want)
			}
		})
	}
}

// In a group, a source whose topic_regex matches nothing yet joins with
// no topic, and reads a matching topic created later: the group is
// told of it and assigns its partitions.
func TestTopicRegexInAGroupReadsATopicCreatedLater(t *testing.T) {
	c := cluster(t, 1, "other", 1)
	h := newHost(t)
	var logs logbuf.Buffer
	cfg := groupConfig(c, "", "loaders", h, &logs)
	cfg.Topics, cfg.TopicRegex = nil, `shop\..*`
	m := startMember(t, cfg, h)
	time.Sleep(300 * time.Millisecond) // joined, with nothing to read
	adm := admin(t, c)
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "shop.orders"); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "shop.orders", 0, 200, nil)
	waitFor(t, func() string { return "the topic created later is read: " + logs.String() }, func() bool { return h.recorded() >= 200 })
	if err := m.stop(t); err != nil {
		t.Fatal(err)
	}
	wantAll(t, h, "shop.orders", endOffsets(t, adm, "shop.orders"))
}
