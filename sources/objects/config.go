package objects

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
	httpsrc "github.com/skipprd/skipprd/sources/http"
	"github.com/skipprd/skipprd/sources/messages"
)

// Values of Config.Format.
const (
	FormatAuto      = "auto" // by the key's extension: .jsonl/.ndjson, .csv, .parquet
	FormatJSONLines = "jsonl"
	FormatCSV       = "csv"
	FormatParquet   = "parquet"
)

// Values of Config.OnError.
const (
	OnErrorStop = "stop" // Run returns the object's error
	OnErrorSkip = "skip" // the object is logged, counted and passed over
)

// Values of Config.Order.
const (
	// OrderAny: objects may appear under any name at any time. Each keeps
	// an offset key for good, so a pipeline's life is bounded by what the
	// host's offsets hold (engine Config.OffsetsViewMax, 2^18 keys for
	// all sources together).
	OrderAny = "any"
	// OrderKeys: new objects' names sort after those already listed,
	// give or take Settle (time-stamped names). The source keeps a floor
	// under which everything is done (floorline.go): no limit on objects.
	OrderKeys = "keys"
)

// Defaults and bounds.
const (
	DefaultInFlight = 4
	InFlightMax     = 64
	DefaultSettle   = time.Minute

	DefaultPoll       = 10 * time.Second
	DefaultChunkBytes = 8 << 20
	// ChunkBytesMax keeps a chunk's Arrow form within one engine unit:
	// httpsrc bounds what a body decodes to at 8× its bytes, and a unit
	// may hold 512 MiB (engine unitBytesMax).
	ChunkBytesMax = 64 << 20
	// NameMax: a source name is part of every offset key, which must
	// leave room for a hashed object key (offsetKey).
	NameMax = 63

	// retryBase and retryMax bound the backoff after a refused unit, as
	// the generator's: long enough not to spin on a full admission,
	// short enough that a freed writer is fed again within a flush or two.
	retryBase = 25 * time.Millisecond
	retryMax  = time.Second
)

// Config configures a Source. Zero fields take the defaults.
type Config struct {
	// Name is the source's name; offset keys are "objects/{Name}/{key}".
	// 1..NameMax bytes of UTF-8, without '/' or '#'.
	Name      string
	Namespace string // the table every row goes to (sources.CheckNamespace)
	SinkRef   string // the sink it goes to
	// Format: FormatAuto (default), FormatJSONLines, FormatCSV or
	// FormatParquet for every object whatever its name.
	Format string
	Poll   time.Duration // between listings; 0: DefaultPoll
	// OnError: OnErrorStop (default) or OnErrorSkip, for an object that
	// cannot be ingested as it is.
	OnError string
	// ChunkBytes bounds the text one JSON-lines or CSV unit decodes
	// (cut at a record boundary), and the uncompressed row groups of a
	// Parquet unit (at least one group); 0: DefaultChunkBytes.
	ChunkBytes int64
	// Limits apply to each chunk as to an HTTP body. Zero fields take
	// httpsrc.DefaultLimits, except BodyBytes: ChunkBytes plus room for
	// a CSV header line (LineBytes + 2).
	Limits    httpsrc.Limits
	Allocator memory.Allocator // nil: memory.DefaultAllocator
	Logger    *slog.Logger     // nil: slog.Default()
	// Order: OrderAny (default) or OrderKeys.
	Order string
	// Settle (OrderKeys): how long after an object was first listed the
	// floor may rise over it; 0: DefaultSettle. Objects that appear with
	// a key below one already listed are found if they appear within it.
	Settle time.Duration
	// InFlight: objects ingested at once, each a unit at a time;
	// 1..InFlightMax, 0: DefaultInFlight.
	InFlight int
	// Sleep waits d (a backoff, the poll interval) or until ctx ends;
	// nil is a timer. The simulator supplies its own clock's.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the time (Settle); nil: time.Now. Tasks runs the tasks of
	// objects in flight; nil: goroutines. The simulator supplies its own.
	Now   func() time.Time
	Tasks Tasks
	// Once: Run lists the store once and returns nil when every object
	// of that listing is finished (every unit acked, or skipped with
	// OnError "skip"), without polling again (once.go). A listing or
	// read error of the store ends it with that error instead of waiting
	// for a next poll; the next Run resumes from the acked offsets.
	Once bool
}

func (c Config) withDefaults() Config {
	if c.Format == "" {
		c.Format = FormatAuto
	}
	if c.OnError == "" {
		c.OnError = OnErrorStop
	}
	if c.Poll == 0 {
		c.Poll = DefaultPoll
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.Order == "" {
		c.Order = OrderAny
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.InFlight == 0 {
		c.InFlight = DefaultInFlight
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Limits = limitsWithDefaults(c.Limits, c.ChunkBytes)
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func limitsWithDefaults(l httpsrc.Limits, chunk int64) httpsrc.Limits {
	l = messages.Limits(l, 0)
	if l.BodyBytes == 0 {
		l.BodyBytes = chunk + int64(l.LineBytes) + 2 // room for a CSV header line
	}
	return l
}

// check reports what is wrong with a defaulted configuration.
func (c Config) check() error {
	switch {
	case c.Name == "" || len(c.Name) > NameMax || !utf8.ValidString(c.Name) || strings.ContainsAny(c.Name, "/#"):
		return fmt.Errorf("objects source: name %q: 1..%d bytes of UTF-8 without '/' or '#'", c.Name, NameMax)
	case c.SinkRef == "" || len(c.SinkRef) > segment.KeyFieldBytesMax:
		return fmt.Errorf("objects source %q: sink %q: 1..%d bytes", c.Name, c.SinkRef, segment.KeyFieldBytesMax)
	case c.Format != FormatAuto && c.Format != FormatJSONLines && c.Format != FormatCSV && c.Format != FormatParquet:
		return fmt.Errorf("objects source %q: format %q: one of %s, %s, %s, %s", c.Name, c.Format, FormatAuto, FormatJSONLines, FormatCSV, FormatParquet)
	case c.OnError != OnErrorStop && c.OnError != OnErrorSkip:
		return fmt.Errorf("objects source %q: on_error %q: %s or %s", c.Name, c.OnError, OnErrorStop, OnErrorSkip)
	case c.Order != OrderAny && c.Order != OrderKeys:
		return fmt.Errorf("objects source %q: order %q: %s or %s", c.Name, c.Order, OrderAny, OrderKeys)
	case c.Settle < 0:
		return fmt.Errorf("objects source %q: settle %v is negative", c.Name, c.Settle)
	case c.InFlight < 1 || c.InFlight > InFlightMax:
		return fmt.Errorf("objects source %q: in_flight %d outside 1..%d", c.Name, c.InFlight, InFlightMax)
	case c.Poll < 0:
		return fmt.Errorf("objects source %q: poll %v is negative", c.Name, c.Poll)
	case c.ChunkBytes < 1 || c.ChunkBytes > ChunkBytesMax:
		return fmt.Errorf("objects source %q: chunk of %d bytes outside 1..%d", c.Name, c.ChunkBytes, ChunkBytesMax)
	case c.ChunkBytes > c.Limits.BodyBytes:
		return fmt.Errorf("objects source %q: chunk of %d bytes over the body limit of %d", c.Name, c.ChunkBytes, c.Limits.BodyBytes)
	}
	if err := sources.CheckNamespace(c.Namespace); err != nil {
		return fmt.Errorf("objects source %q: %w", c.Name, err)
	}
	return checkLimits(c.Name, c.Limits)
}

// checkLimits repeats httpsrc's own check, so that a bad limit is a
// configuration error at New rather than every chunk's decode error.
func checkLimits(name string, l httpsrc.Limits) error {
	if l.BodyBytes < 1 || l.BodyBytes > math.MaxInt32 || l.LineBytes < 1 || l.Rows < 1 || l.Rows > math.MaxInt32 ||
		l.Fields < 1 || l.BatchRows < 1 {
		return fmt.Errorf("objects source %q: limits %+v: every one at least 1, body bytes and rows at most %d", name, l, math.MaxInt32)
	}
	return nil
}
