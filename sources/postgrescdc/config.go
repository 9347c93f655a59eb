package postgrescdc

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources"
)

// Defaults and bounds of Config.
const (
	DefaultUnitRows          = 16384
	DefaultChunkRows         = 1024
	DefaultChunkBytes        = 4 << 20
	DefaultUnitBytes         = 32 << 20
	DefaultFlushInterval     = 500 * time.Millisecond
	DefaultBufferRows        = 4 * DefaultUnitRows
	DefaultBufferBytes       = 128 << 20
	DefaultIngestConcurrency = 4
	DefaultStatusInterval    = 10 * time.Second
	DefaultMessageBytesMax   = 64 << 20

	// ChunkRowsMax and ChunkBytesMax bound the chunk cut (they share one
	// offset value, chunkingValue: 24 and 40 bits).
	ChunkRowsMax  = 1<<24 - 1
	ChunkBytesMax = 1 << 30
	// UnitBytesMax keeps a unit well inside the engine's limit on one unit.
	UnitBytesMax = 256 << 20
	// MessageBytesMaxLimit: a replication message carries one row; a
	// Postgres value may hold up to 1 GiB.
	MessageBytesMaxLimit = 1 << 30
	// TablesMax bounds the tables of one source (two offset keys each).
	TablesMax = 4096
	// IngestConcurrencyMax bounds the tables submitted at once.
	IngestConcurrencyMax = 64
)

// Config configures a Source. Zero fields take the defaults.
type Config struct {
	// URL of the database whose changes are captured, in libpq URL or
	// key=value form. Its password never appears in logs or errors.
	URL string
	// Publication is created (FOR TABLE Tables, or FOR ALL TABLES when
	// Tables is empty) if it does not exist. An existing one is not
	// altered: it must publish inserts, updates and deletes of every
	// table in Tables. Lower-case letters, digits and '_', 1..63 bytes.
	Publication string
	// Slot is the logical replication slot, created with the pgoutput
	// plugin if it does not exist; it names the source's offset keys.
	// Same rule as Publication.
	Slot string
	// Tables to capture, "schema.table"; empty: every table of the
	// publication. Each table's name is its namespace (sources.CheckNamespace),
	// so two tables of one name in different schemas cannot both be
	// captured; the schema name follows the same rule.
	Tables  []string
	SinkRef string // the sink every table goes to

	// UnitRows bounds the rows of one unit, and a table holding that many
	// rows not yet submitted makes a flush due. UnitBytes bounds the
	// value bytes of a unit (a unit always holds at least one chunk).
	UnitRows  int
	UnitBytes int64
	// ChunkRows and ChunkBytes cut each transaction's changes to one
	// table into chunks (doc.go, Positions). They are recorded in the
	// offsets by the first unit and must not change for a slot.
	ChunkRows  int
	ChunkBytes int64
	// FlushInterval bounds how long a change waits before a flush is due.
	FlushInterval time.Duration
	// BufferRows and BufferBytes bound what waits for a flush; past
	// them the source stops reading until the flush in progress is acked.
	BufferRows  int
	BufferBytes int64
	// IngestConcurrency bounds the tables whose units are submitted at
	// once (each table's units go one at a time, in order).
	IngestConcurrency int
	// StatusInterval is the longest time between two status updates to
	// the server (lowered to a quarter of its wal_sender_timeout).
	StatusInterval time.Duration
	// MessageBytesMax bounds one replication message (one row, old and
	// new) and one snapshot row; a larger one stops the source.
	MessageBytesMax int

	// HostOffsets reads the host's offsets view as it is now
	// (storage.Host.Offsets). After a restart a host with a disk WAL may
	// hold units it replays from its log that the offsets given to Run
	// lack; with HostOffsets the source reads the view again after each
	// table's first unit and never stores a chunk of those twice (fly).
	// nil: it cannot tell, and may (a sink applying by order token ends
	// the same).
	HostOffsets OffsetsFunc

	Allocator memory.Allocator // nil: memory.DefaultAllocator
	Logger    *slog.Logger     // nil: slog.Default()
	// Sleep waits d or until ctx ends (backoffs); nil: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Once: Run returns nil once every change committed before the
	// server's WAL position at start is acked and confirmed (once.go).
	Once bool
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.UnitRows, DefaultUnitRows)
	def(&c.ChunkRows, min(DefaultChunkRows, c.UnitRows))
	def(&c.BufferRows, max(DefaultBufferRows, 2*c.UnitRows))
	def(&c.IngestConcurrency, DefaultIngestConcurrency)
	def(&c.MessageBytesMax, DefaultMessageBytesMax)
	def64(&c.UnitBytes, DefaultUnitBytes)
	def64(&c.ChunkBytes, DefaultChunkBytes)
	def64(&c.BufferBytes, DefaultBufferBytes)
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = DefaultStatusInterval
	}
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

// objectName is the rule for slot and publication names: what Postgres
// allows for a slot, so neither ever needs quoting.
var objectName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// check reports what is wrong with a defaulted configuration.
func (c Config) check() error {
	if err := checkURL(c.URL); err != nil {
		return err
	}
	switch {
	case !objectName.MatchString(c.Slot):
		return fmt.Errorf("postgrescdc: slot %q: 1..63 lower-case letters, digits and '_'", c.Slot)
	case !objectName.MatchString(c.Publication):
		return fmt.Errorf("postgrescdc: publication %q: 1..63 lower-case letters, digits and '_'", c.Publication)
	case c.SinkRef == "" || len(c.SinkRef) > segment.KeyFieldBytesMax:
		return fmt.Errorf("postgrescdc: sink %q: 1..%d bytes", c.SinkRef, segment.KeyFieldBytesMax)
	case len(c.Tables) > TablesMax:
		return fmt.Errorf("postgrescdc: %d tables, at most %d", len(c.Tables), TablesMax)
	case c.ChunkRows < 1 || c.ChunkRows > ChunkRowsMax || c.ChunkRows > c.UnitRows:
		return fmt.Errorf("postgrescdc: chunk of %d rows outside 1..min(%d, unit rows %d)", c.ChunkRows, ChunkRowsMax, c.UnitRows)
	case c.ChunkBytes < 1 || c.ChunkBytes > ChunkBytesMax || c.ChunkBytes > c.UnitBytes:
		return fmt.Errorf("postgrescdc: chunk of %d bytes outside 1..min(%d, unit bytes %d)", c.ChunkBytes, ChunkBytesMax, c.UnitBytes)
	case c.UnitBytes > UnitBytesMax || c.UnitRows > segment.PartRowsMax:
		return fmt.Errorf("postgrescdc: units of %d rows and %d bytes: at most %d rows and %d bytes", c.UnitRows, c.UnitBytes, segment.PartRowsMax, UnitBytesMax)
	case c.BufferRows < c.UnitRows || c.BufferBytes < c.UnitBytes:
		return fmt.Errorf("postgrescdc: buffer of %d rows and %d bytes below one unit (%d rows, %d bytes)", c.BufferRows, c.BufferBytes, c.UnitRows, c.UnitBytes)
	case c.FlushInterval < 0 || c.StatusInterval < time.Second:
		return fmt.Errorf("postgrescdc: flush interval %v must not be negative, status interval %v at least 1s", c.FlushInterval, c.StatusInterval)
	case c.IngestConcurrency < 1 || c.IngestConcurrency > IngestConcurrencyMax:
		return fmt.Errorf("postgrescdc: ingest concurrency %d outside 1..%d", c.IngestConcurrency, IngestConcurrencyMax)
	case c.MessageBytesMax < 1<<10 || c.MessageBytesMax > MessageBytesMaxLimit:
		return fmt.Errorf("postgrescdc: message limit of %d bytes outside %d..%d", c.MessageBytesMax, 1<<10, MessageBytesMaxLimit)
	}
	return checkTables(c.Tables)
}

// checkTables checks the configured table names: each parses, none is
// listed twice, no two share a namespace.
func checkTables(tables []string) error {
	byNS := map[string]string{}
	for _, t := range tables {
		n, err := parseTableName(t)
		if err != nil {
			return err
		}
		if prev, ok := byNS[n.table]; ok {
			return fmt.Errorf("postgrescdc: tables %q and %q both go to namespace %q", prev, t, n.table)
		}
		byNS[n.table] = t
	}
	return nil
}

// tableName is a table's schema and name.
type tableName struct{ schema, table string }

func (n tableName) String() string { return n.schema + "." + n.table }

// parseTableName parses "schema.table"; both parts follow the namespace
// rule, so neither needs quoting and offset keys stay unambiguous.
func parseTableName(s string) (tableName, error) {
	schema, table, ok := strings.Cut(s, ".")
	if !ok {
		return tableName{}, fmt.Errorf("postgrescdc: table %q: want schema.table", s)
	}
	n := tableName{schema, table}
	return n, n.check()
}

func (n tableName) check() error {
	if err := sources.CheckNamespace(n.schema); err != nil {
		return fmt.Errorf("postgrescdc: table %s: schema: %w", n, err)
	}
	if err := sources.CheckNamespace(n.table); err != nil {
		return fmt.Errorf("postgrescdc: table %s: %w", n, err)
	}
	return nil
}

// checkURL refuses a missing URL and one that looks like a URL but does
// not parse; its errors never quote the string (it may hold a password).
func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("postgrescdc: no URL")
	}
	if strings.Contains(s, "://") {
		if _, err := url.Parse(s); err != nil {
			return fmt.Errorf("postgrescdc: the URL does not parse (not shown: it may hold a password)")
		}
	}
	return nil
}
