package httpsrc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// fuzzLimits are small enough for a fuzzer to reach every limit (an
// Arrow stream's schema alone takes a kilobyte or two).
func fuzzLimits(f Format) Limits {
	if f == ArrowIPC {
		return Limits{BodyBytes: 16 << 10, LineBytes: 1, Rows: 40, Fields: 10, BatchRows: 3}
	}
	return Limits{BodyBytes: 4096, LineBytes: 200, Rows: 40, Fields: 6, BatchRows: 3}
}

// checkFuzzResult checks what Decode returned for any input: an
// *InputError or ErrTooLarge, or batches valid in every respect, and
// nothing held once released. It returns the result's fingerprint.
func checkFuzzResult(t *testing.T, f Format, body []byte) segment.SchemaFingerprint {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	lim := fuzzLimits(f)
	start := time.Now()
	d, err := Decode(f, bytes.NewReader(body), lim, mem)
	// A few kilobytes decode in well under a millisecond; seconds would
	// be a loop worth a denial of service. (10 s: a loaded machine can
	// stall a process for a second or two.)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Decode took %v", took)
	}
	if err != nil {
		var ie *InputError
		if !errors.As(err, &ie) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error %v (%T); want an *InputError or ErrTooLarge", err, err)
		}
		if ie != nil && (ie.Line < 0 || (f == ArrowIPC && (ie.Line != 0 || ie.Column != ""))) {
			t.Fatalf("InputError %+v", ie)
		}
		mem.AssertSize(t, 0)
		return 0
	}
	defer func() {
		d.Release()
		mem.AssertSize(t, 0)
	}()
	if err := checkDecoded(d, lim); err != nil {
		t.Fatal(err)
	}
	if n := d.Schema.NumFields(); n < 1 || n > lim.Fields {
		t.Fatalf("%d fields", n)
	}
	for _, b := range d.Batches {
		for i, col := range b.Columns() {
			if err := validateColumn(col); err != nil {
				t.Fatalf("column %d: %v", i, err)
			}
		}
	}
	if f != ArrowIPC {
		checkNames(t, d.Schema)
	}
	return segment.FingerprintOf(d.Schema)
}

func checkNames(t *testing.T, s *arrow.Schema) {
	seen := map[string]bool{}
	for _, f := range s.Fields() {
		if nameProblem(f.Name) != "" || seen[f.Name] || !f.Nullable {
			t.Fatalf("field %q (nullable %v) in %v", f.Name, f.Nullable, s)
		}
		seen[f.Name] = true
	}
}

func FuzzDecodeJSONLines(f *testing.F) {
	for _, seed := range []string{
		`{"a": 1, "b": "x", "c": true, "d": null, "e": 1.5, "f": "2024-01-02T03:04:05Z", "g": {"h": [1]}}`,
		"{\"a\": 1}\n{\"a\": 2.5}\n{\"b\": \"2024-01-02T03:04:05.123+01:00\"}\r\n\n{}",
		"{\"a\": 9007199254740993}\n{\"a\": 0.5}",
		"{\"a\": 1}\n{\"a\": \"x\"}",
		"{\"a\": 1, \"a\": 2}",
		"[1]\n5\n\"s\"\nnull",
		"{\"a\": 1} {\"b\": 2}",
		"{\"a\": \"\\u00e9\\ud800\"}",
		"\xef\xbb\xbf{\"\": 1}",
		"{\"a\": 1e400}",
		"{\"a\":" + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "}",
		strings.Repeat("{\"x\": 1}\n", 41),
		"{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1}",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Decoding is a pure function of the body.
		if a, b := checkFuzzResult(t, JSONLines, body), checkFuzzResult(t, JSONLines, body); a != b {
			t.Fatalf("fingerprints %x and %x for one body", a, b)
		}
	})
}

// FuzzScanLine holds the JSON line scanner to utf8.Valid && json.Valid,
// and its members to json.Decoder's (checkScan, jsonscan_test.go).
func FuzzScanLine(f *testing.F) {
	for _, seed := range []string{
		`{"a": 1, "b": "x\u00e9\ud83d\ude00", "c": [true, null, {"d": -0.5e3}], "e\n": {}}`,
		`{"a":"\ud800"}`, "{\"a\": \"\xed\xa0\x80\"}", `{"a": 01}`, `{"a": [1,]}`, `[1]`, ` "s" `, `{"a":1} x`,
		"{\"a\":" + strings.Repeat("[", 120) + strings.Repeat("]", 120) + "}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkScan(t, line) })
}

// FuzzParseTimestamp holds parseTimestamp's fast path to time.Parse
// (checkTimestamp, timestamp_test.go).
func FuzzParseTimestamp(f *testing.F) {
	for _, seed := range []string{"2024-01-02T03:04:05Z", "2024-02-29T23:59:59.123456789+05:30", "0000-01-01T00:00:00-23:59", "2024-01-02T3:04:05Z"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) { checkTimestamp(t, s) })
}

func FuzzDecodeCSV(f *testing.F) {
	for _, seed := range []string{
		"a,b,c,d,e\n1,2.5,true,2024-01-02T03:04:05Z,x\n,1e3,FALSE,,\"y,\"\"z\"\"\n\"\n",
		"a,b\r\n1,2\r\n\r\n3,4",
		"a,a\n1,2\n",
		"a,,b\n",
		"a,b\n1\n",
		"a,b\n1,x\"y\n",
		"a\nNaN\nInf\n0x10\n1_000\n",
		"a\n9007199254740993\n0.5\n",
		"\xef\xbb\xbfa\n\xff\n",
		"a\n" + strings.Repeat("1\n", 41),
		"a,b,c,d,e,f,g\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if a, b := checkFuzzResult(t, CSV, body), checkFuzzResult(t, CSV, body); a != b {
			t.Fatalf("fingerprints %x and %x for one body", a, b)
		}
	})
}

func FuzzDecodeArrowIPC(f *testing.F) {
	rec := richBatch(f, 5)
	defer rec.Release()
	f.Add(writeStream(f, rec.Schema(), []arrow.RecordBatch{rec, rec}))
	// Each column alone, so that the corpus starts with every layout.
	for i, field := range rec.Schema().Fields() {
		one := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{field}, nil), []arrow.Array{rec.Column(i)}, rec.NumRows())
		f.Add(writeStream(f, one.Schema(), []arrow.RecordBatch{one}))
		one.Release()
	}
	small := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), small)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, nil)
	one := b.NewRecordBatch()
	b.Release()
	defer one.Release()
	f.Add(writeStream(f, small, []arrow.RecordBatch{one}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFuzzResult(t, ArrowIPC, body)
	})
}
