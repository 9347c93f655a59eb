package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
	httpsrc "github.com/skipprd/skipprd/sources/http"
	"github.com/skipprd/skipprd/sources/messages"
)

// Values of Config.Format: how a record's value becomes a row
// (sources/messages).
const (
	FormatJSON  = messages.FormatJSON
	FormatText  = messages.FormatText
	FormatBytes = messages.FormatBytes
)

// Values of Config.Start: where a partition without a recovered offset
// starts.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// Values of Config.OnGap: what records removed by retention before
// they were ingested do.
const (
	OnGapStop = "stop" // Run returns a *GapError naming the partition and the range
	OnGapSkip = "skip" // the range is logged and counted, and the partition goes on from the log's start
)

// Defaults and bounds.
const (
	DefaultUnitBytes   = 8 << 20
	DefaultBufferBytes = 64 << 20
	DefaultInFlight    = 4
	DefaultMetadata    = 30 * time.Second
	// UnitBytesMax keeps a unit's Arrow form within one engine unit, as
	// the objects source's chunks.
	UnitBytesMax = 64 << 20
	// NameMax: a source name is part of every offset key, which must
	// leave room for a hashed topic name (offsetKey).
	NameMax = 63
	// InFlightMax bounds the units awaiting their answer at once.
	InFlightMax = 64
	// GroupMax bounds a consumer group id (Kafka's own limit is the
	// coordinator key's, far above).
	GroupMax = 255

	retryBase = 25 * time.Millisecond
	retryMax  = time.Second
)

// Config configures a Source. Zero fields take the defaults.
type Config struct {
	// Name is the source's name; offset keys are
	// "kafka/{Name}/{topic}/{partition}". 1..NameMax bytes of UTF-8,
	// without '/' or '#'.
	Name    string
	Brokers []string // seed brokers, host:port
	// Topics are the topics read, every partition of each; or, exclusive
	// with it, TopicRegex: every topic whose whole name it matches, except
	// internal ones (a leading "__"), looked up at the start and every
	// Metadata interval. Exactly one of the two.
	Topics     []string
	TopicRegex string
	// Group, if set, is a consumer group the source joins: the group
	// assigns its partitions (members split them), and after each unit is
	// acked its offsets are committed to the group, so that lag tools see
	// the progress. Where an assigned partition resumes is still the
	// host's offsets view, never the group's committed offsets.
	Group string
	// Offsets, if set, returns the host's offsets view as it is now
	// (storage.Host.Offsets); with a Group each assignment resumes from
	// it, max-merged with the offsets given to Run and those acked since.
	// nil: those alone.
	Offsets func(ctx context.Context) (segment.Offsets, error)
	// Namespace is the table every topic's rows go to; "" (default):
	// each topic to the namespace of its own name.
	Namespace string
	SinkRef   string // the sink it goes to
	Format    string // FormatJSON (default), FormatText or FormatBytes
	Start     string // StartEarliest (default) or StartLatest
	OnGap     string // OnGapStop (default) or OnGapSkip
	// ReadCommitted reads only committed records of transactional
	// producers (offsets then have gaps where the markers and aborted
	// records are: those are not lost records).
	ReadCommitted bool
	// UnitBytes bounds the record values one unit holds (at least one
	// record); 0: DefaultUnitBytes.
	UnitBytes int
	// BufferBytes bounds the record values fetched and not yet acked;
	// past it the source stops fetching until units are acked. 0:
	// DefaultBufferBytes.
	BufferBytes int
	// InFlight bounds the units awaiting their answer at once, each on
	// partitions of its own; 0: DefaultInFlight.
	InFlight int
	// Metadata is how often the topics are looked up again for new
	// partitions and, with TopicRegex, new topics; 0: DefaultMetadata.
	Metadata time.Duration
	// Limits apply to each unit's values as to an HTTP body (JSON).
	// Zero fields take httpsrc.DefaultLimits, except BodyBytes:
	// UnitBytes plus a line of room per record's framing.
	Limits    httpsrc.Limits
	Allocator memory.Allocator // nil: memory.DefaultAllocator
	Logger    *slog.Logger     // nil: slog.Default()
	// ClientOpts are given to the franz-go client after the source's
	// own: TLS (kgo.DialTLSConfig), SASL (kgo.SASL), a dialer.
	ClientOpts []kgo.Opt
	// Sleep waits d (a backoff) or until ctx ends; nil is a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Once: Run returns nil once every partition found at its start is
	// ingested, and acked, up to its high watermark at start (once.go).
	// Not with a Group.
	Once bool
}

func (c Config) withDefaults() Config {
	if c.Format == "" {
		c.Format = FormatJSON
	}
	if c.Start == "" {
		c.Start = StartEarliest
	}
	if c.OnGap == "" {
		c.OnGap = OnGapStop
	}
	if c.UnitBytes == 0 {
		c.UnitBytes = DefaultUnitBytes
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = max(DefaultBufferBytes, 2*c.UnitBytes)
	}
	if c.InFlight == 0 {
		c.InFlight = DefaultInFlight
	}
	if c.Metadata == 0 {
		c.Metadata = DefaultMetadata
	}
	c.Limits = messages.Limits(c.Limits, int64(c.UnitBytes)+int64(c.Limits.LineBytes)+2)
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Sleep == nil {
		c.Sleep = sources.Sleep
	}
	return c
}

// check reports what is wrong with a defaulted configuration.
func (c Config) check() error {
	name := c.Name
	switch {
	case name == "" || len(name) > NameMax || !utf8.ValidString(name) || strings.ContainsAny(name, "/#"):
		return fmt.Errorf("kafka source: name %q: 1..%d bytes of UTF-8 without '/' or '#'", name, NameMax)
	case len(c.Brokers) == 0:
		return fmt.Errorf("kafka source %q: brokers: at least one host:port", name)
	case len(c.Topics) == 0 && c.TopicRegex == "":
		return fmt.Errorf("kafka source %q: topics or topic_regex: one is required", name)
	case len(c.Topics) > 0 && c.TopicRegex != "":
		return fmt.Errorf("kafka source %q: topics and topic_regex: give one, not both", name)
	case c.SinkRef == "" || len(c.SinkRef) > segment.KeyFieldBytesMax:
		return fmt.Errorf("kafka source %q: sink %q: 1..%d bytes", name, c.SinkRef, segment.KeyFieldBytesMax)
	case c.Format != FormatJSON && c.Format != FormatText && c.Format != FormatBytes:
		return fmt.Errorf("kafka source %q: format %q: one of %s, %s, %s", name, c.Format, FormatJSON, FormatText, FormatBytes)
	case c.Start != StartEarliest && c.Start != StartLatest:
		return fmt.Errorf("kafka source %q: start %q: %s or %s", name, c.Start, StartEarliest, StartLatest)
	case c.OnGap != OnGapStop && c.OnGap != OnGapSkip:
		return fmt.Errorf("kafka source %q: on_gap %q: %s or %s", name, c.OnGap, OnGapStop, OnGapSkip)
	case c.UnitBytes < 1 || c.UnitBytes > UnitBytesMax:
		return fmt.Errorf("kafka source %q: unit of %d bytes outside 1..%d", name, c.UnitBytes, UnitBytesMax)
	case c.BufferBytes < c.UnitBytes:
		return fmt.Errorf("kafka source %q: buffer of %d bytes below the unit's %d", name, c.BufferBytes, c.UnitBytes)
	case c.InFlight < 1 || c.InFlight > InFlightMax:
		return fmt.Errorf("kafka source %q: in_flight %d outside 1..%d", name, c.InFlight, InFlightMax)
	case c.Metadata < 0:
		return fmt.Errorf("kafka source %q: metadata interval %v is negative", name, c.Metadata)
	case c.Once && c.Group != "":
		return fmt.Errorf("kafka source %q: group %q: a once run reads every partition up to its high watermark at start, "+
			"and a group splits the partitions among its members; leave group out to run once", name, c.Group)
	}
	if err := messages.CheckLimits(c.Limits, int64(c.UnitBytes)); err != nil {
		return fmt.Errorf("kafka source %q: %w", name, err)
	}
	if c.TopicRegex != "" {
		if _, err := CompileTopicRegex(c.TopicRegex); err != nil {
			return fmt.Errorf("kafka source %q: %w", name, err)
		}
	}
	if c.Group != "" {
		if err := CheckGroup(c.Group); err != nil {
			return fmt.Errorf("kafka source %q: %w", name, err)
		}
	}
	return c.checkTopics()
}

// checkTopics checks the topics listed: names, each once, and a
// namespace of its own.
func (c Config) checkTopics() error {
	name := c.Name
	seen, tables := map[string]bool{}, map[string]string{}
	for _, t := range c.Topics {
		if err := CheckTopic(t); err != nil {
			return fmt.Errorf("kafka source %q: %w", name, err)
		}
		if seen[t] {
			return fmt.Errorf("kafka source %q: topic %q listed twice", name, t)
		}
		seen[t] = true
		ns := c.namespaceOf(t)
		if err := sources.CheckNamespace(ns); err != nil {
			return fmt.Errorf("kafka source %q: topic %q: %w (set namespace to choose one)", name, t, err)
		}
		if other, ok := tables[ns]; ok && c.Namespace == "" {
			return fmt.Errorf("kafka source %q: topics %q and %q both go to namespace %q; give them a source each with its own namespace", name, other, t, ns)
		}
		tables[ns] = t
	}
	return nil
}

// namespaceOf is the namespace of topic's rows: Namespace, or
// NamespaceOf(topic).
func (c Config) namespaceOf(topic string) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return NamespaceOf(topic)
}

// NamespaceOf is the namespace a topic's rows go to when the source
// names none: the topic name in lower case with '.' and '-' as '_' (and
// "t_" in front of one that does not start with a letter).
func NamespaceOf(topic string) string {
	ns := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' {
			return '_'
		}
		return unicode.ToLower(r)
	}, topic)
	if ns == "" || ns[0] < 'a' || ns[0] > 'z' {
		ns = "t_" + ns
	}
	return ns
}

// CheckTopic applies Kafka's own rule for topic names.
func CheckTopic(t string) error {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("topic %q: want 1 to 249 characters, and not \".\" or \"..\"", t)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic %q: character %q; Kafka allows letters, digits and . _ - only", t, r)
		}
	}
	return nil
}

// CompileTopicRegex compiles a topic_regex, anchored: it must match a
// topic's whole name, as Kafka's Java pattern subscription does
// ("shop\\..*" matches "shop.orders", not "old.shop.orders").
func CompileTopicRegex(expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil { // the error quotes expr, not the anchored form
		return nil, fmt.Errorf("topic_regex %q: %w", expr, err)
	}
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// CheckGroup checks a consumer group id: 1..GroupMax bytes of printable
// UTF-8 without spaces.
func CheckGroup(g string) error {
	if g == "" || len(g) > GroupMax || !utf8.ValidString(g) {
		return fmt.Errorf("group %q: want 1..%d bytes of UTF-8, e.g. skipprd-orders", g, GroupMax)
	}
	for _, r := range g {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("group %q: character %q; want printable characters without spaces", g, r)
		}
	}
	return nil
}
