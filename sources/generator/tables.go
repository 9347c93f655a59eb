package generator

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// A table is one kind of synthetic data: its Arrow schema, how far apart
// consecutive records are in event time, and how one record's columns are
// derived. A record is a pure function of (table, partition, offset,
// epoch): fill draws every value from a PRNG seeded by exactly those, in
// a fixed order, so any record can be regenerated alone, whatever batch
// it was first produced in. The step is the table's, not the stream's
// rate, so changing a rate between runs does not change the data.
type table struct {
	schema *arrow.Schema
	step   time.Duration // event-time distance between consecutive offsets
	fill   func(b *array.RecordBuilder, r *rowRand, offset uint64, at time.Time)
}

var tsType = arrow.FixedWidthTypes.Timestamp_us

var (
	eventTypes = []string{"view", "view", "view", "click", "click", "scroll", "add_to_cart", "purchase", "signup", "logout"}
	countries  = []string{"US", "US", "GB", "DE", "FR", "IN", "BR", "JP", "NL", "AU"}
	devices    = []string{"desktop", "desktop", "mobile", "mobile", "mobile", "tablet"}
	statuses   = []string{"placed", "paid", "paid", "shipped", "shipped", "delivered", "delivered", "cancelled", "refunded"}
	currencies = []string{"USD", "USD", "EUR", "GBP"}
	pages      = []string{"/", "/search", "/products/%d", "/products/%d", "/cart", "/checkout", "/blog/%d", "/account"}
	referrers  = []string{"https://www.google.com/", "https://news.ycombinator.com/", "https://t.co/", "https://duckduckgo.com/"}
)

// tables are the kinds a Stream may name.
var tables = map[string]table{
	"events": {
		schema: arrow.NewSchema([]arrow.Field{
			{Name: "event_id", Type: arrow.BinaryTypes.String},
			{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
			{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "event_type", Type: arrow.BinaryTypes.String},
			{Name: "country", Type: arrow.BinaryTypes.String},
			{Name: "event_time", Type: tsType},
			{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		}, nil),
		step: time.Millisecond,
		fill: func(b *array.RecordBuilder, r *rowRand, offset uint64, at time.Time) {
			str(b, 0).Append(r.uuid())
			i64(b, 1).Append(int64(offset))
			i64(b, 2).Append(r.userID())
			str(b, 3).Append(r.pick(eventTypes))
			str(b, 4).Append(r.pick(countries))
			ts(b, 5).Append(r.jitter(at, time.Millisecond))
			f64(b, 6).Append(r.money(0, 500))
		},
	},
	"pageviews": {
		schema: arrow.NewSchema([]arrow.Field{
			{Name: "view_id", Type: arrow.BinaryTypes.String},
			{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "url", Type: arrow.BinaryTypes.String},
			{Name: "referrer", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "viewed_at", Type: tsType},
			{Name: "load_ms", Type: arrow.PrimitiveTypes.Float64},
		}, nil),
		step: time.Second,
		fill: func(b *array.RecordBuilder, r *rowRand, _ uint64, at time.Time) {
			str(b, 0).Append(r.uuid())
			i64(b, 1).Append(r.userID())
			page := r.pick(pages)
			n := r.intn(5000)
			if strings.Contains(page, "%d") {
				page = fmt.Sprintf(page, n)
			}
			str(b, 2).Append("https://shop.example.com" + page)
			if ref := r.intn(len(referrers) + 2); ref < len(referrers) {
				str(b, 3).Append(referrers[ref])
			} else {
				str(b, 3).AppendNull() // direct traffic
			}
			ts(b, 4).Append(r.jitter(at, time.Second))
			f64(b, 5).Append(math.Round(r.expo(350)*10) / 10)
		},
	},
	"orders": {
		schema: arrow.NewSchema([]arrow.Field{
			{Name: "order_id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "customer_id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "status", Type: arrow.BinaryTypes.String},
			{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
			{Name: "currency", Type: arrow.BinaryTypes.String},
			{Name: "created_at", Type: tsType},
		}, nil),
		step: time.Minute,
		fill: func(b *array.RecordBuilder, r *rowRand, offset uint64, at time.Time) {
			i64(b, 0).Append(int64(offset) + 1) // a snapshot's primary key
			i64(b, 1).Append(r.userID())
			str(b, 2).Append(r.pick(statuses))
			f64(b, 3).Append(r.money(5, 900))
			str(b, 4).Append(r.pick(currencies))
			ts(b, 5).Append(r.jitter(at, time.Minute))
		},
	},
	"sessions": {
		schema: arrow.NewSchema([]arrow.Field{
			{Name: "session_id", Type: arrow.BinaryTypes.String},
			{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "device", Type: arrow.BinaryTypes.String},
			{Name: "started_at", Type: tsType},
			{Name: "duration_s", Type: arrow.PrimitiveTypes.Float64},
			{Name: "pages", Type: arrow.PrimitiveTypes.Int32},
		}, nil),
		step: 100 * time.Millisecond,
		fill: func(b *array.RecordBuilder, r *rowRand, _ uint64, at time.Time) {
			str(b, 0).Append(r.uuid())
			i64(b, 1).Append(r.userID())
			str(b, 2).Append(r.pick(devices))
			ts(b, 3).Append(r.jitter(at, 100*time.Millisecond))
			f64(b, 4).Append(math.Round(r.expo(240)*1000) / 1000)
			b.Field(5).(*array.Int32Builder).Append(int32(1 + r.intn(30)))
		},
	},
}

// Typed column builders of a record builder.

func str(b *array.RecordBuilder, i int) *array.StringBuilder {
	return b.Field(i).(*array.StringBuilder)
}

func i64(b *array.RecordBuilder, i int) *array.Int64Builder {
	return b.Field(i).(*array.Int64Builder)
}

func f64(b *array.RecordBuilder, i int) *array.Float64Builder {
	return b.Field(i).(*array.Float64Builder)
}

func ts(b *array.RecordBuilder, i int) *array.TimestampBuilder {
	return b.Field(i).(*array.TimestampBuilder)
}

// rowRand is splitmix64: tiny, fast, and a good mixer for sequential
// seeds, which is exactly how records are seeded (offset after offset).
type rowRand struct{ s uint64 }

// seedFor mixes the record's identity into a PRNG state.
func seedFor(namespace string, partition int, offset uint64) *rowRand {
	h := fnv.New64a()
	h.Write([]byte(namespace))
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], uint64(partition))
	h.Write(p[:])
	r := &rowRand{s: h.Sum64() ^ offset*0x9E3779B97F4A7C15}
	r.next() // decorrelate neighbouring offsets before the first draw
	return r
}

func (r *rowRand) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rowRand) intn(n int) int { return int(r.next() % uint64(n)) }

func (r *rowRand) float() float64 { return float64(r.next()>>11) / (1 << 53) }

func (r *rowRand) pick(from []string) string { return from[r.intn(len(from))] }

// uuid returns a version-4-shaped UUID string.
func (r *rowRand) uuid() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], r.next())
	binary.LittleEndian.PutUint64(b[8:], r.next())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// userID is skewed: a few heavy users, a long tail of a million.
func (r *rowRand) userID() int64 {
	u := r.float()
	return 1 + int64(u*u*u*1_000_000)
}

// money is an amount in [lo, hi) rounded to cents.
func (r *rowRand) money(lo, hi float64) float64 {
	return math.Round((lo+r.float()*(hi-lo))*100) / 100
}

// expo draws from an exponential distribution with the given mean.
func (r *rowRand) expo(mean float64) float64 {
	return -math.Log(1-r.float()) * mean
}

// jitter places a record somewhere in its step after at, in microseconds.
func (r *rowRand) jitter(at time.Time, step time.Duration) arrow.Timestamp {
	return arrow.Timestamp(at.Add(time.Duration(r.next() % uint64(step))).UnixMicro())
}
