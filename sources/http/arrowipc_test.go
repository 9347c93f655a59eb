package httpsrc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// writeStream returns recs as an Arrow IPC stream.
func writeStream(t testing.TB, schema *arrow.Schema, recs []arrow.RecordBatch, opts ...ipc.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// richBatch returns a batch of n rows with flat, nested, null and
// dictionary columns; every few rows null.
func richBatch(t testing.TB, n int) arrow.RecordBatch {
	t.Helper()
	mem := memory.NewGoAllocator()
	meta := arrow.NewMetadata([]string{"k"}, []string{"v"})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "t", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	}, &meta)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for r := range n {
		valid := r%4 != 3
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{int64(r * 1000)}, []bool{valid})
		b.Field(1).(*array.Float64Builder).Append(float64(r) / 4)
		b.Field(2).(*array.StringBuilder).AppendValues([]string{strings.Repeat("é", r%5)}, []bool{valid})
		b.Field(3).(*array.BooleanBuilder).AppendValues([]bool{r%2 == 0}, []bool{valid})
		b.Field(4).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(int64(r) * 1e6)}, []bool{valid})
		b.Field(5).(*array.NullBuilder).AppendNull()
		lb := b.Field(6).(*array.ListBuilder)
		lb.Append(valid)
		if valid {
			lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(r), 1}, nil)
		}
		sb := b.Field(7).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("x")
		b.Field(8).(*array.BinaryDictionaryBuilder).AppendString([]string{"red", "green"}[r%2])
	}
	return b.NewRecordBatch()
}

func TestArrowRoundTrip(t *testing.T) {
	rec := richBatch(t, 10)
	defer rec.Release()
	empty := rec.NewSlice(0, 0)
	defer empty.Release()
	stream := writeStream(t, rec.Schema(), []arrow.RecordBatch{rec, empty, rec})
	lim := DefaultLimits()
	lim.BatchRows = 4
	d := mustDecode(t, ArrowIPC, string(stream), lim)
	if !d.Schema.Equal(rec.Schema()) || segment.FingerprintOf(d.Schema) != segment.FingerprintOf(rec.Schema()) {
		t.Fatalf("schema %v; want %v", d.Schema, rec.Schema())
	}
	if d.Rows != 20 {
		t.Errorf("Rows %d; want 20", d.Rows)
	}
	// Each 10-row batch in slices of 4, 4, 2; the empty batch dropped.
	bounds := [][2]int64{{0, 4}, {4, 8}, {8, 10}, {0, 4}, {4, 8}, {8, 10}}
	if len(d.Batches) != len(bounds) {
		t.Fatalf("%d batches; want %d", len(d.Batches), len(bounds))
	}
	for i, b := range d.Batches {
		want := rec.NewSlice(bounds[i][0], bounds[i][1])
		if !array.RecordEqual(b, want) {
			t.Errorf("batch %d:\n%v\nwant\n%v", i, b, want)
		}
		want.Release()
	}
}

func TestArrowStreamEndings(t *testing.T) {
	rec := richBatch(t, 3)
	defer rec.Release()
	stream := writeStream(t, rec.Schema(), []arrow.RecordBatch{rec})
	eos := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}
	if !bytes.HasSuffix(stream, eos) {
		t.Fatal("the writer wrote no end-of-stream marker")
	}
	// A stream may end without its marker.
	if d := mustDecode(t, ArrowIPC, string(stream[:len(stream)-8]), DefaultLimits()); d.Rows != 3 {
		t.Errorf("Rows %d; want 3", d.Rows)
	}
	_, err := decode(t, ArrowIPC, string(stream)+"x", DefaultLimits())
	wantInputError(t, err, 0, "", "bytes follow the end-of-stream marker")
	complete := string(stream[:len(stream)-8])
	for body, says := range map[string]string{
		complete[:len(complete)-2]:            "message 3: the stream ends inside its body",
		string(stream[:len(stream)-2]):        "message 4: the stream ends inside its metadata length",
		complete + "\xff\xff":                 "message 4: the stream ends inside its message prefix",
		complete + "\xff\xff\xff\xff\x08\x00": "message 4: the stream ends inside its metadata length",
	} {
		_, err = decode(t, ArrowIPC, body, DefaultLimits())
		wantInputError(t, err, 0, "", says)
	}
}

func TestArrowInputErrors(t *testing.T) {
	int64s := func(names ...string) *arrow.Schema {
		fs := make([]arrow.Field, len(names))
		for i, n := range names {
			fs[i] = arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64}
		}
		return arrow.NewSchema(fs, nil)
	}
	batch := func(s *arrow.Schema, rows int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), s)
		defer b.Release()
		for _, f := range b.Fields() {
			for r := range rows {
				f.(*array.Int64Builder).Append(int64(r))
			}
		}
		return b.NewRecordBatch()
	}
	stream := func(s *arrow.Schema, rows ...int) string {
		var recs []arrow.RecordBatch
		for _, n := range rows {
			recs = append(recs, batch(s, n))
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		return string(writeStream(t, s, recs))
	}
	lim := DefaultLimits()
	lim.Fields, lim.Rows = 2, 5
	for _, tc := range []struct{ name, body, says string }{
		{"empty body", "", "no rows"},
		{"schema only", stream(int64s("a")), "no rows"},
		{"empty batches", stream(int64s("a"), 0, 0), "no rows"},
		{"no fields", stream(arrow.NewSchema(nil, nil)), "the stream's schema has no fields"},
		{"too many fields", stream(int64s("a", "b", "c"), 1), "the stream's schema has 3 fields; at most 2"},
		{"empty name", stream(int64s("a", ""), 1), "schema field 2: a field name is empty"},
		{"duplicate names", stream(int64s("a", "a"), 1), `schema fields 1 and 2 are both named "a"`},
		{"long name", stream(int64s(strings.Repeat("x", 257)), 1), "is 257 bytes long; at most 256"},
		{"too many rows", stream(int64s("a"), 3, 3), "more than 5 rows in the body"},
		{"legacy framing", "\x10\x00\x00\x00" + strings.Repeat("\x00", 16), "continuation marker"},
		{"not a stream", "hello, world", "continuation marker"},
		{"negative metadata length", "\xff\xff\xff\xff\xf0\xff\xff\xff", "metadata length -16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(t, ArrowIPC, tc.body, lim)
			wantInputError(t, err, 0, "", tc.says)
		})
	}
	if d := mustDecode(t, ArrowIPC, stream(int64s("a", "b"), 5), lim); d.Rows != 5 {
		t.Errorf("Rows %d; want 5", d.Rows)
	}
}

// messageSpans returns where each message of a stream starts, and its
// metadata and body lengths.
func messageSpans(t testing.TB, stream []byte) (spans [][3]int) {
	t.Helper()
	for off := 0; off+8 <= len(stream); {
		metaLen := int(binary.LittleEndian.Uint32(stream[off+4:]))
		if metaLen == 0 {
			break
		}
		msg := ipc.NewMessage(memory.NewBufferBytes(stream[off+8:off+8+metaLen]), memory.NewBufferBytes(nil))
		bodyLen := int(msg.BodyLen())
		msg.Release()
		spans = append(spans, [3]int{off, metaLen, bodyLen})
		off += 8 + metaLen + bodyLen
	}
	return spans
}

func TestArrowLengthsPastTheLimit(t *testing.T) {
	rec := richBatch(t, 50)
	defer rec.Release()
	stream := writeStream(t, rec.Schema(), []arrow.RecordBatch{rec})
	spans := messageSpans(t, stream)
	last := spans[len(spans)-1]
	for _, tc := range []struct {
		name  string
		limit int64
		says  string
	}{
		// The limit ends inside the last message's metadata, then body:
		// its length claims more than is left, refused before reading.
		{"metadata", int64(last[0] + 8 + last[1] - 1), fmt.Sprintf("claims %d bytes of metadata; %d are left", last[1], last[1]-1)},
		{"body", int64(last[0] + 8 + last[1] + last[2] - 1), fmt.Sprintf("claims a body of %d bytes; %d are left", last[2], last[2]-1)},
		{"whole", int64(len(stream) - 1), "the body is longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := DefaultLimits()
			lim.BodyBytes = tc.limit
			_, err := decode(t, ArrowIPC, string(stream), lim)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v; want ErrTooLarge saying %q", err, tc.says)
			}
		})
	}
	lim := DefaultLimits()
	lim.BodyBytes = int64(len(stream))
	mustDecode(t, ArrowIPC, string(stream), lim)
}

// peakAllocator records the largest single allocation.
type peakAllocator struct {
	memory.Allocator
	peak int
}

func (p *peakAllocator) Allocate(n int) []byte {
	p.peak = max(p.peak, n)
	return p.Allocator.Allocate(n)
}

func (p *peakAllocator) Reallocate(n int, b []byte) []byte {
	p.peak = max(p.peak, n)
	return p.Allocator.Reallocate(n, b)
}

// goAllocated returns the bytes the Go heap allocated while f ran.
func goAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestArrowClaimsCostWhatWasSent(t *testing.T) {
	prefix := func(metaLen uint32) string {
		return string(binary.LittleEndian.AppendUint32([]byte{0xFF, 0xFF, 0xFF, 0xFF}, metaLen))
	}
	for _, tc := range []struct {
		name, body string
		tooLarge   bool
	}{
		// 2 GiB of metadata claimed, against a 64 MiB limit.
		{"past the limit", prefix(0x7FFFFFF0) + "tiny", true},
		// 48 MiB claimed, within the limit, 100 bytes sent.
		{"within the limit", prefix(48<<20) + strings.Repeat("x", 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &peakAllocator{Allocator: checkedMem(t)}
			var err error
			heap := goAllocated(func() {
				_, err = Decode(ArrowIPC, strings.NewReader(tc.body), DefaultLimits(), mem)
			})
			if got := errors.Is(err, ErrTooLarge); got != tc.tooLarge {
				t.Fatalf("error %v; ErrTooLarge %v, want %v", err, got, tc.tooLarge)
			}
			if !tc.tooLarge {
				wantInputError(t, err, 0, "", "the stream ends inside its metadata")
			}
			if mem.peak > 64<<10 || heap > 1<<20 {
				t.Errorf("largest allocation from mem %d bytes, %d from the Go heap; want at most 64 KiB and 1 MiB", mem.peak, heap)
			}
		})
	}
}

// TestArrowMetadataIsVerified patches each 4-byte word of a stream's
// schema metadata that equals the field count to 0x7FFFFFFF. arrow-go
// alone would allocate make([]arrow.Field, 0x7FFFFFFF), 190 GB, and the
// process would die of it.
func TestArrowMetadataIsVerified(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "abc", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	b.Field(0).(*array.Int64Builder).Append(5)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	stream := writeStream(t, schema, []arrow.RecordBatch{rec})
	metaLen := int(binary.LittleEndian.Uint32(stream[4:]))
	patched := 0
	for at := 8; at+4 <= 8+metaLen; at += 4 {
		if binary.LittleEndian.Uint32(stream[at:]) != 1 {
			continue
		}
		patched++
		bad := bytes.Clone(stream)
		binary.LittleEndian.PutUint32(bad[at:], 0x7FFFFFFF)
		var err error
		heap := goAllocated(func() { _, err = decode(t, ArrowIPC, string(bad), DefaultLimits()) })
		wantInputError(t, err, 0, "", "invalid message metadata")
		if heap > 1<<20 {
			t.Errorf("patch at %d: %d bytes allocated", at, heap)
		}
	}
	if patched == 0 {
		t.Fatal("no word to patch: the writer's layout changed")
	}
}

func TestArrowRefusesCompression(t *testing.T) {
	rec := richBatch(t, 5)
	defer rec.Release()
	for _, opt := range []ipc.Option{ipc.WithZstd(), ipc.WithLZ4()} {
		stream := writeStream(t, rec.Schema(), []arrow.RecordBatch{rec}, opt)
		_, err := decode(t, ArrowIPC, string(stream), DefaultLimits())
		wantInputError(t, err, 0, "", "compressed record batches are not accepted")
	}
}

func TestArrowValidatesData(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"ok", "QQQQ"}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	stream := writeStream(t, schema, []arrow.RecordBatch{rec})
	at := bytes.Index(stream, []byte("QQQQ"))
	bad := bytes.Clone(stream)
	bad[at+1] = 0xFF
	_, err := decode(t, ArrowIPC, string(bad), DefaultLimits())
	wantInputError(t, err, 0, "", `column "s": arrow/array: string at index 1 is not valid utf8`)
}

// TestArrowDictionaryDeltasWithinBudget: each delta makes arrow-go build
// the whole dictionary again for the next batch, which keeps it: memory
// quadratic in the stream, stopped at the decoded budget.
func TestArrowDictionaryDeltasWithinBudget(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}}, nil)
	mem := memory.NewGoAllocator()
	db := array.NewDictionaryBuilder(mem, dt).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	var recs []arrow.RecordBatch
	for i := range 200 {
		db.AppendString(strings.Repeat(string(rune('a'+i%26)), 1000) + time.Duration(i).String())
		arr := db.NewArray()
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{arr}, 1))
		arr.Release()
	}
	stream := writeStream(t, schema, recs, ipc.WithDictionaryDeltas(true))
	for _, r := range recs {
		r.Release()
	}
	lim := DefaultLimits()
	lim.BodyBytes = int64(len(stream)) // about 270 KB, decoding to 20 MB
	_, err := decode(t, ArrowIPC, string(stream), lim)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "decoded, the stream would take more than") {
		t.Fatalf("error %v; want ErrTooLarge for the decoded size", err)
	}
	lim.BodyBytes = 64 << 20 // a budget of 512 MiB holds it
	if d := mustDecode(t, ArrowIPC, string(stream), lim); d.Rows != 200 {
		t.Errorf("Rows %d; want 200", d.Rows)
	}
}

// TestArrowMutations decodes a few thousand randomly damaged streams:
// each is refused as bad input or too large, or decodes to valid
// batches, and nothing stays allocated either way — arrow-go drops what
// it half-loaded when it fails, which the tracked allocator gets back.
func TestArrowMutations(t *testing.T) {
	rec := richBatch(t, 6)
	defer rec.Release()
	stream := writeStream(t, rec.Schema(), []arrow.RecordBatch{rec, rec})
	rng := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for range 3000 {
		bad := bytes.Clone(stream)
		for range 1 + rng.IntN(4) {
			bad[rng.IntN(len(bad))] = byte(rng.IntN(256))
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		d, err := Decode(ArrowIPC, bytes.NewReader(bad), DefaultLimits(), mem)
		var ie *InputError
		switch {
		case err == nil:
			for _, b := range d.Batches {
				for i, col := range b.Columns() {
					if err := validateColumn(col); err != nil {
						t.Fatalf("column %d of a decoded batch: %v", i, err)
					}
				}
			}
			d.Release()
		case errors.As(err, &ie) || errors.Is(err, ErrTooLarge):
			refused++
		default:
			t.Fatalf("error %v (%T)", err, err)
		}
		mem.AssertSize(t, 0)
	}
	if refused < 1000 {
		t.Errorf("only %d of 3000 damaged streams refused", refused)
	}
}
