package httpsrc

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// bodies returns a valid body of each format, of n rows.
func bodies(t testing.TB, n int) map[Format]string {
	var jl, csv strings.Builder
	csv.WriteString("a,b\n")
	ints := array.NewInt64Builder(memory.NewGoAllocator())
	defer ints.Release()
	for i := range n {
		jl.WriteString(`{"a": 1, "b": "xy"}` + "\n")
		csv.WriteString("1,xy\n")
		ints.Append(int64(i))
	}
	arr := ints.NewArray()
	defer arr.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(n))
	defer rec.Release()
	return map[Format]string{JSONLines: jl.String(), CSV: csv.String(), ArrowIPC: string(writeStream(t, schema, []arrow.RecordBatch{rec}))}
}

func TestBodyLimit(t *testing.T) {
	for f, body := range bodies(t, 100) {
		t.Run(f.String(), func(t *testing.T) {
			lim := DefaultLimits()
			lim.BodyBytes = int64(len(body))
			mustDecode(t, f, body, lim)
			lim.BodyBytes--
			_, err := decode(t, f, body, lim)
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("error %v; want ErrTooLarge", err)
			}
			// Past the limit the body is not read: an endless one fails too.
			endless := &countingReader{r: io.MultiReader(strings.NewReader(body), zeros{})}
			_, err = Decode(f, endless, lim, checkedMem(t))
			if !errors.Is(err, ErrTooLarge) || endless.n > lim.BodyBytes+1 {
				t.Errorf("error %v after reading %d bytes; want ErrTooLarge after at most %d", err, endless.n, lim.BodyBytes+1)
			}
		})
	}
}

// A JSON line or CSV record cut by the limit is reported as too large,
// not as the invalid text the cut makes of it.
func TestBodyLimitWinsOverTheCut(t *testing.T) {
	lim := DefaultLimits()
	lim.BodyBytes = 30
	for f, body := range map[Format]string{
		JSONLines: `{"a": 1}` + "\n" + `{"a": "a long string value"}`,
		CSV:       "a\n\"" + strings.Repeat("x", 40) + "\"\n",
	} {
		_, err := decode(t, f, body, lim)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v: error %v; want ErrTooLarge", f, err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}

func TestBodyReadErrorPassesThrough(t *testing.T) {
	boom := errors.New("connection reset")
	for f, body := range bodies(t, 50) {
		r := io.MultiReader(strings.NewReader(body[:len(body)/2]), errReader{boom})
		_, err := Decode(f, r, DefaultLimits(), checkedMem(t))
		var ie *InputError
		if !errors.Is(err, boom) || errors.As(err, &ie) {
			t.Errorf("%v: error %v; want the read error, not an InputError", f, err)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestBatchRowsSplitsEveryFormat(t *testing.T) {
	lim := DefaultLimits()
	lim.BatchRows = 7
	for f, body := range bodies(t, 30) {
		d := mustDecode(t, f, body, lim)
		var sizes []int64
		for _, b := range d.Batches {
			sizes = append(sizes, b.NumRows())
		}
		if len(sizes) != 5 || sizes[0] != 7 || sizes[4] != 2 || d.Rows != 30 {
			t.Errorf("%v: batch sizes %v, Rows %d; want [7 7 7 7 2], 30", f, sizes, d.Rows)
		}
	}
}

func TestRowsLimitEveryFormat(t *testing.T) {
	lim := DefaultLimits()
	lim.Rows = 10
	for f, body := range bodies(t, 10) {
		mustDecode(t, f, body, lim)
	}
	lines := map[Format]int{JSONLines: 11, CSV: 12, ArrowIPC: 0}
	for f, body := range bodies(t, 11) {
		_, err := decode(t, f, body, lim)
		wantInputError(t, err, lines[f], "", "more than 10 rows in the body")
	}
}

// A few bytes of JSON may not demand gigabytes of Arrow: each null of an
// int64 column takes 8 bytes.
func TestDecodedSizeBound(t *testing.T) {
	lim := DefaultLimits()
	lim.BodyBytes = 64 << 10
	var b strings.Builder
	b.WriteString("{")
	for i := range 26 {
		b.WriteString(`"` + string(rune('a'+i)) + `": 1, `)
	}
	b.WriteString(`"z1": 2}` + "\n")
	b.WriteString(strings.Repeat("{}\n", 20_000)) // 60 KB: 27 × 8 × 20,000 bytes decoded
	_, err := decode(t, JSONLines, b.String(), lim)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "would take about") {
		t.Fatalf("error %v; want ErrTooLarge for the decoded size", err)
	}
	lim.BodyBytes = 8 << 20
	mustDecode(t, JSONLines, b.String(), lim)
}

func TestInvalidLimits(t *testing.T) {
	for _, mod := range []func(*Limits){
		func(l *Limits) { l.BodyBytes = 0 },
		func(l *Limits) { l.BodyBytes = 1 << 31 },
		func(l *Limits) { l.LineBytes = 0 },
		func(l *Limits) { l.Rows = 0 },
		func(l *Limits) { l.Rows = 1 << 31 },
		func(l *Limits) { l.Fields = -1 },
		func(l *Limits) { l.BatchRows = 0 },
	} {
		lim := DefaultLimits()
		mod(&lim)
		_, err := Decode(JSONLines, strings.NewReader("{}"), lim, checkedMem(t))
		var ie *InputError
		if err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "httpsrc: Limits.") {
			t.Errorf("limits %+v: error %v; want a Limits error", lim, err)
		}
	}
	if got, want := DefaultLimits(), (Limits{BodyBytes: 64 << 20, LineBytes: 1 << 20, Rows: 1_000_000, Fields: 1_024, BatchRows: 65_536}); got != want {
		t.Errorf("DefaultLimits() = %+v; want %+v", got, want)
	}
}

func TestUnknownFormat(t *testing.T) {
	_, err := Decode(Format(0), strings.NewReader("{}"), DefaultLimits(), checkedMem(t))
	if !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("error %v; want ErrUnsupportedType", err)
	}
}

func TestReleaseTwiceAndNil(t *testing.T) {
	mem := checkedMem(t)
	d, err := Decode(JSONLines, strings.NewReader(`{"a": "x"}`), DefaultLimits(), mem)
	if err != nil {
		t.Fatal(err)
	}
	d.Release()
	d.Release()
	(*Decoded)(nil).Release()
}

func TestInputErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    InputError
		want string
	}{
		{InputError{Line: 7, Column: "price", Reason: "r"}, `line 7, field "price": r`},
		{InputError{Line: 3, Reason: "r"}, "line 3: r"},
		{InputError{Column: "c", Reason: "r"}, `field "c": r`},
		{InputError{Reason: "no rows"}, "no rows"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q; want %q", tc.e, got, tc.want)
		}
	}
	long := strings.Repeat("é", 100)
	if got := quote(long); len(got) > quoteMax+8 || !strings.HasSuffix(got, `"…`) {
		t.Errorf("quote of 200 bytes: %q", got)
	}
}
