package natsjs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
	httpsrc "github.com/skipprd/skipprd/sources/http"
	"github.com/skipprd/skipprd/sources/messages"
)

// Values of Config.Format (sources/messages).
const (
	FormatJSON  = messages.FormatJSON
	FormatText  = messages.FormatText
	FormatBytes = messages.FormatBytes
)

// Values of Config.Start: where a stream without a recovered sequence
// starts.
const (
	StartFirst = "first" // the stream's first message
	StartNew   = "new"   // messages published from now on
)

// Values of Config.OnGap: what messages removed by the stream's limits
// before they were ingested do.
const (
	OnGapStop = "stop" // Run returns a *GapError naming the range
	OnGapSkip = "skip" // the range is logged and counted, and the source goes on
)

// Defaults and bounds.
const (
	DefaultUnitBytes   = 8 << 20
	DefaultBufferBytes = 64 << 20
	UnitBytesMax       = 64 << 20
	NameMax            = 63

	retryBase = 25 * time.Millisecond
	retryMax  = time.Second
)

// Config configures a Source. Zero fields take the defaults.
type Config struct {
	// Name is the source's name; its offset key is
	// "nats/{Name}/{Stream}". 1..NameMax bytes of UTF-8, without '/' or '#'.
	Name   string
	URL    string // nats://host:port (several, comma-separated)
	Stream string // the JetStream stream read
	// Subjects filter the stream's messages; none: every message.
	Subjects []string
	// Namespace is the table every row goes to; "": NamespaceOf(Stream).
	Namespace string
	SinkRef   string
	Format    string // FormatJSON (default), FormatText or FormatBytes
	Start     string // StartFirst (default) or StartNew
	OnGap     string // OnGapStop (default) or OnGapSkip
	// UnitBytes bounds the values of one unit (at least one message);
	// 0: DefaultUnitBytes. BufferBytes bounds the values fetched and not
	// yet acked; past it the source stops pulling. 0: DefaultBufferBytes.
	UnitBytes   int
	BufferBytes int
	Limits      httpsrc.Limits   // as the Kafka source's: zero fields take httpsrc.DefaultLimits
	Allocator   memory.Allocator // nil: memory.DefaultAllocator
	Logger      *slog.Logger     // nil: slog.Default()
	// Options are given to nats.Connect after the source's own
	// (credentials, TLS).
	Options []nats.Option
	// Sleep waits d (a backoff) or until ctx ends; nil is a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Once: Run returns nil once it has ingested, and had acked, every
	// message up to the stream's last sequence at start (once.go).
	Once bool
}

func (c Config) withDefaults() Config {
	if c.Format == "" {
		c.Format = FormatJSON
	}
	if c.Start == "" {
		c.Start = StartFirst
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

func (c Config) check() error {
	name := c.Name
	switch {
	case name == "" || len(name) > NameMax || !utf8.ValidString(name) || strings.ContainsAny(name, "/#"):
		return fmt.Errorf("nats source: name %q: 1..%d bytes of UTF-8 without '/' or '#'", name, NameMax)
	case c.URL == "":
		return fmt.Errorf("nats source %q: url: a nats://host:port", name)
	case CheckStream(c.Stream) != nil:
		return fmt.Errorf("nats source %q: %w", name, CheckStream(c.Stream))
	case c.SinkRef == "" || len(c.SinkRef) > segment.KeyFieldBytesMax:
		return fmt.Errorf("nats source %q: sink %q: 1..%d bytes", name, c.SinkRef, segment.KeyFieldBytesMax)
	case c.Format != FormatJSON && c.Format != FormatText && c.Format != FormatBytes:
		return fmt.Errorf("nats source %q: format %q: one of %s, %s, %s", name, c.Format, FormatJSON, FormatText, FormatBytes)
	case c.Start != StartFirst && c.Start != StartNew:
		return fmt.Errorf("nats source %q: start %q: %s or %s", name, c.Start, StartFirst, StartNew)
	case c.OnGap != OnGapStop && c.OnGap != OnGapSkip:
		return fmt.Errorf("nats source %q: on_gap %q: %s or %s", name, c.OnGap, OnGapStop, OnGapSkip)
	case c.UnitBytes < 1 || c.UnitBytes > UnitBytesMax:
		return fmt.Errorf("nats source %q: unit of %d bytes outside 1..%d", name, c.UnitBytes, UnitBytesMax)
	case c.BufferBytes < c.UnitBytes:
		return fmt.Errorf("nats source %q: buffer of %d bytes below the unit's %d", name, c.BufferBytes, c.UnitBytes)
	}
	if err := messages.CheckLimits(c.Limits, int64(c.UnitBytes)); err != nil {
		return fmt.Errorf("nats source %q: %w", name, err)
	}
	for _, s := range c.Subjects {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			return fmt.Errorf("nats source %q: subject %q: a subject (tokens separated by '.', wildcards * and >)", name, s)
		}
	}
	if err := sources.CheckNamespace(c.namespace()); err != nil {
		return fmt.Errorf("nats source %q: %w (set namespace to choose one)", name, err)
	}
	return nil
}

func (c Config) namespace() string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return NamespaceOf(c.Stream)
}

// NamespaceOf is the namespace of a stream's rows when the source names
// none: the stream name in lower case with '-' as '_' ("t_" in front of
// one that does not start with a letter).
func NamespaceOf(stream string) string {
	ns := strings.Map(func(r rune) rune {
		if r == '-' {
			return '_'
		}
		return unicode.ToLower(r)
	}, stream)
	if ns == "" || ns[0] < 'a' || ns[0] > 'z' {
		ns = "t_" + ns
	}
	return ns
}

// CheckStream applies JetStream's rule for stream names.
func CheckStream(s string) error {
	if s == "" || len(s) > 255 || strings.ContainsAny(s, " \t\r\n.*>/\\") {
		return fmt.Errorf("stream %q: 1 to 255 characters, none of space . * > / \\", s)
	}
	return nil
}
