package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// decoder is a Decoder whose one metadata column "_seq" is 100 + the
// message's index.
func decoder(t *testing.T, format string) (*Decoder, *memory.CheckedAllocator) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return &Decoder{Format: format, Limits: httpsrc.DefaultLimits(), Mem: mem,
		Meta:       []arrow.Field{{Name: "_seq", Type: arrow.PrimitiveTypes.Int64}},
		AppendMeta: func(i int, bs []array.Builder) { bs[0].(*array.Int64Builder).Append(int64(100 + i)) }}, mem
}

func TestEveryValueIsOneRowInOrderWithItsMetadata(t *testing.T) {
	for _, format := range []string{FormatJSON, FormatText, FormatBytes} {
		t.Run(format, func(t *testing.T) {
			d, _ := decoder(t, format)
			d.Limits.BatchRows = 2 // several batches
			values := [][]byte{[]byte(`{"a": 1}`), nil, []byte("{\n \"a\": 3,\n \"b\": \"x\"\n}"), []byte(`{"a":4}`)}
			schema, batches, err := d.Decode(values)
			if err != nil {
				t.Fatal(err)
			}
			defer ReleaseAll(batches)
			var seqs []int64
			for _, b := range batches {
				if !b.Schema().Equal(schema) {
					t.Fatalf("batch schema %v, want %v", b.Schema(), schema)
				}
				seqs = append(seqs, b.Column(int(b.NumCols())-1).(*array.Int64).Int64Values()...)
			}
			if len(seqs) != 4 || seqs[0] != 100 || seqs[3] != 103 {
				t.Fatalf("metadata %v: want 100..103, one row per value in order", seqs)
			}
			if format != FormatJSON && !batches[0].Column(0).IsNull(1) {
				t.Errorf("a tombstone's value is not null")
			}
		})
	}
}

// TestAValueThatCannotBeARowIsNamed: a bad value is named once it comes
// first; behind others it asks for fewer values (ErrSplit), so that the
// values before it are rows and no limit of the values together is
// blamed on one of them. Halving as the sources do reaches it.
func TestAValueThatCannotBeARowIsNamed(t *testing.T) {
	for _, c := range []struct {
		format string
		values [][]byte
		reason string
	}{
		{FormatJSON, [][]byte{[]byte(`{"a":1}`), []byte("{\n\"a\": }")}, "not JSON"},
		{FormatJSON, [][]byte{[]byte(`{"a":1}`), []byte(`[1,2]`)}, "line 1"},
		{FormatJSON, [][]byte{[]byte(`{"a":1}`), []byte(`{"_seq":1}`)}, `field "_seq"`},
		{FormatText, [][]byte{[]byte("ok"), {0xff, 0xfe}}, "not UTF-8"},
	} {
		d, _ := decoder(t, c.format)
		_, batches, err := d.Decode(c.values)
		ReleaseAll(batches)
		if !errors.Is(err, ErrSplit) {
			t.Errorf("%s %q: %v; want ErrSplit (a bad value behind a good one)", c.format, c.values, err)
		}
		_, batches, err = d.Decode(c.values[1:])
		ReleaseAll(batches)
		ve, ok := errors.AsType[*ValueError](err)
		if !ok || ve.Index != 0 || !strings.Contains(ve.Reason, c.reason) {
			t.Errorf("%s %q alone: %v; want message 0: …%s…", c.format, c.values[1], err, c.reason)
		}
	}
}

// TestTooManyRowsTogetherAsksForFewer: more values than Limits.Rows is a
// limit of the unit, not an error of the value past it.
func TestTooManyRowsTogetherAsksForFewer(t *testing.T) {
	d, _ := decoder(t, FormatJSON)
	d.Limits.Rows = 2
	_, _, err := d.Decode([][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`), []byte(`{"a":3}`)})
	if !errors.Is(err, ErrSplit) {
		t.Fatalf("three values, two rows allowed: %v, want ErrSplit", err)
	}
}

func TestTooMuchTogetherAsksForFewer(t *testing.T) {
	d, _ := decoder(t, FormatJSON)
	d.Limits.BodyBytes = 20
	_, _, err := d.Decode([][]byte{[]byte(`{"a":"0123456789"}`), []byte(`{"a":"0123456789"}`)})
	if !errors.Is(err, ErrSplit) {
		t.Fatalf("two values over the body limit: %v, want ErrSplit", err)
	}
	_, _, err = d.Decode([][]byte{[]byte(`{"a":"0123456789012345678901234567890"}`)})
	if _, ok := errors.AsType[*ValueError](err); !ok {
		t.Fatalf("one value over the limit: %v, want a *ValueError", err)
	}
}
