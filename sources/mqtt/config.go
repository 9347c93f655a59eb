package mqtt

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"

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

// Defaults and bounds.
const (
	DefaultInFlight = 64
	InFlightMax     = 1024
	NameMax         = 63
	// IDBytesMax bounds a message id: with its prefix it is the unit's
	// idempotency key.
	IDBytesMax = 128
)

// Config configures a Source. Zero fields take the defaults.
type Config struct {
	// Name is the source's name: its MQTT client id is "skipprd-{Name}"
	// (the persistent session) and its idempotency keys
	// "mqtt/{Name}/{id}". 1..NameMax bytes of UTF-8 without '/' or '#'.
	Name   string
	Broker string   // tcp://host:1883 (ssl://, ws:// as paho takes them)
	Topics []string // topic filters subscribed at QoS 1
	// Namespace is the table every message goes to (required: topics
	// may be wildcards).
	Namespace string
	SinkRef   string
	Format    string // FormatJSON (default), FormatText or FormatBytes
	// IDField, with FormatJSON, names the field of each message that
	// identifies it: its value is the unit's idempotency key, so a
	// message the broker delivers again is stored once (exactly once).
	// "": at least once — a message redelivered after a crash may be
	// stored twice.
	IDField string
	// InFlight bounds the messages awaiting the host's answer at once;
	// the broker's own limit (its receive maximum, Mosquitto's
	// max_inflight_messages) may be lower. 0: DefaultInFlight.
	InFlight  int
	Username  string
	Password  string
	Limits    httpsrc.Limits   // as the Kafka source's
	Allocator memory.Allocator // nil: memory.DefaultAllocator
	Logger    *slog.Logger     // nil: slog.Default()
}

func (c Config) withDefaults() Config {
	if c.Format == "" {
		c.Format = FormatJSON
	}
	if c.InFlight == 0 {
		c.InFlight = DefaultInFlight
	}
	c.Limits = messages.Limits(c.Limits, httpsrc.DefaultLimits().BodyBytes)
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) check() error {
	name := c.Name
	switch {
	case name == "" || len(name) > NameMax || !utf8.ValidString(name) || strings.ContainsAny(name, "/#"):
		return fmt.Errorf("mqtt source: name %q: 1..%d bytes of UTF-8 without '/' or '#'", name, NameMax)
	case c.Broker == "":
		return fmt.Errorf("mqtt source %q: broker: a tcp://host:port", name)
	case len(c.Topics) == 0:
		return fmt.Errorf("mqtt source %q: topics: at least one topic filter", name)
	case c.SinkRef == "" || len(c.SinkRef) > segment.KeyFieldBytesMax:
		return fmt.Errorf("mqtt source %q: sink %q: 1..%d bytes", name, c.SinkRef, segment.KeyFieldBytesMax)
	case c.Format != FormatJSON && c.Format != FormatText && c.Format != FormatBytes:
		return fmt.Errorf("mqtt source %q: format %q: one of %s, %s, %s", name, c.Format, FormatJSON, FormatText, FormatBytes)
	case c.IDField != "" && c.Format != FormatJSON:
		return fmt.Errorf("mqtt source %q: id_field %q needs format %s", name, c.IDField, FormatJSON)
	case c.InFlight < 1 || c.InFlight > InFlightMax:
		return fmt.Errorf("mqtt source %q: in_flight %d outside 1..%d", name, c.InFlight, InFlightMax)
	}
	if err := messages.CheckLimits(c.Limits, 1); err != nil {
		return fmt.Errorf("mqtt source %q: %w", name, err)
	}
	for _, t := range c.Topics {
		if err := CheckFilter(t); err != nil {
			return fmt.Errorf("mqtt source %q: %w", name, err)
		}
	}
	if err := sources.CheckNamespace(c.Namespace); err != nil {
		return fmt.Errorf("mqtt source %q: %w", name, err)
	}
	return nil
}

// CheckFilter applies MQTT's rules for a topic filter: '#' only as the
// last level, '+' only as a whole level.
func CheckFilter(f string) error {
	if f == "" || len(f) > 65535 || !utf8.ValidString(f) {
		return fmt.Errorf("topic filter %q: 1 to 65535 bytes of UTF-8", f)
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		switch {
		case strings.Contains(l, "#") && (l != "#" || i != len(levels)-1):
			return fmt.Errorf("topic filter %q: '#' only as the whole last level", f)
		case strings.Contains(l, "+") && l != "+":
			return fmt.Errorf("topic filter %q: '+' only as a whole level", f)
		}
	}
	return nil
}
