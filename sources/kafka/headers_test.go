package kafka

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// produceRecords writes recs to c, in order, to partition 0.
func produceRecords(t *testing.T, c *kfake.Cluster, recs ...*kgo.Record) {
	brokertest.KafkaProduce(t, c, kgo.ManualPartitioner(), recs...)
}

// headersOf renders row i of a _kafka_headers column: "k=v,k=<null>".
func headersOf(l *array.List, i int) string {
	hs := l.ListValues().(*array.Struct)
	keys, vals := hs.Field(0).(*array.String), hs.Field(1).(*array.Binary)
	start, end := l.ValueOffsets(i)
	var parts []string
	for j := int(start); j < int(end); j++ {
		v := "<null>"
		if !vals.IsNull(j) {
			v = string(vals.Value(j))
		}
		parts = append(parts, keys.Value(j)+"="+v)
	}
	return strings.Join(parts, ",")
}

// Every row has the record's headers in their order, duplicates and
// null values kept, and an empty list when it has none: every unit has
// one schema, headers or not.
func TestHeadersAreAColumnOfEveryRowInOrder(t *testing.T) {
	c := cluster(t, 1, "events", 1)
	want := map[int64]string{}
	var recs []*kgo.Record
	for i := range 300 {
		r := &kgo.Record{Topic: "events", Value: fmt.Appendf(nil, `{"id": %d}`, i)}
		switch i % 3 {
		case 1:
			r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte(fmt.Sprint("t", i))}}
			want[int64(i)] = fmt.Sprint("trace=t", i)
		case 2:
			r.Headers = []kgo.RecordHeader{{Key: "k", Value: []byte("b")}, {Key: "a", Value: nil}, {Key: "k", Value: []byte("a")}}
			want[int64(i)] = "k=b,a=<null>,k=a"
		default:
			want[int64(i)] = ""
		}
		recs = append(recs, r)
	}
	produceRecords(t, c, recs...)
	var logs logbuf.Buffer
	cfg := testConfig(c, "events", &logs)
	cfg.UnitBytes = 200 // a few records a unit: some units without any header
	src, _ := New(cfg)
	h := newHost(t)
	var mu sync.Mutex
	got, schemas := map[int64]string{}, map[string]bool{}
	h.onUnit = func(n int, u engine.Unit) error {
		mu.Lock()
		defer mu.Unlock()
		schemas[u.Schema.String()] = true
		if f, ok := u.Schema.FieldsByName(ColHeaders); !ok || !arrow.TypeEqual(f[0].Type, HeadersType) {
			t.Errorf("unit schema %v: no %s of %s", u.Schema, ColHeaders, HeadersType)
		}
		for _, b := range u.Batches {
			offs, hs := column[*array.Int64](t, b, ColOffset), column[*array.List](t, b, ColHeaders)
			for i := range int(b.NumRows()) {
				if hs.IsNull(i) {
					t.Errorf("offset %d: headers null, want a list", offs.Value(i))
				}
				got[offs.Value(i)] = headersOf(hs, i)
			}
		}
		return nil
	}
	if err := runUntil(t, src, h, func() bool { return h.recorded() == 300 }); err != nil {
		t.Fatal(err)
	}
	for off, w := range want {
		if got[off] != w {
			t.Errorf("offset %d: headers %q, want %q", off, got[off], w)
		}
	}
	if len(schemas) != 1 {
		t.Errorf("%d schemas, want one: %v", len(schemas), slices.Collect(maps.Keys(schemas)))
	}
}

// A header key that is not UTF-8 cannot be a utf8 key: the record is
// named, as any record that cannot be a row.
func TestAHeaderKeyThatIsNotUTF8StopsTheSourceNamingIt(t *testing.T) {
	c := cluster(t, 1, "events", 1)
	produceRecords(t, c, &kgo.Record{Topic: "events", Value: []byte(`{"id": 0}`)},
		&kgo.Record{Topic: "events", Value: []byte(`{"id": 1}`), Headers: []kgo.RecordHeader{{Key: "ok"}, {Key: "\xff"}}})
	var logs logbuf.Buffer
	src, _ := New(testConfig(c, "events", &logs))
	err := runUntil(t, src, newHost(t), func() bool { return false })
	var re *RecordError
	if !errors.As(err, &re) || re.Offset != 1 || !strings.Contains(err.Error(), "header 1") {
		t.Fatalf("Run: %v; want the record at offset 1 and its header 1 named", err)
	}
}
