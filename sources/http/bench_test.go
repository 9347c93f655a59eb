package httpsrc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchBody returns about 10 MB of a realistic body in format f.
func benchBody(f Format) string {
	var b strings.Builder
	if f == CSV {
		b.WriteString("id,user,amount,ok,at,note\n")
	}
	for i := 0; b.Len() < 10<<20; i++ {
		at := fmt.Sprintf("2024-01-02T03:%02d:%02d.%06dZ", i/60%60, i%60, i%1000000)
		if f == CSV {
			fmt.Fprintf(&b, "%d,user-%d,%d.%02d,%v,%s,\"a note, %d\"\n", i, i%977, i%10000, i%100, i%3 == 0, at, i)
		} else {
			fmt.Fprintf(&b, `{"id": %d, "user": "user-%d", "amount": %d.%02d, "ok": %v, "at": "%s", "tags": ["a", %d]}`+"\n", i, i%977, i%10000, i%100, i%3 == 0, at, i)
		}
	}
	return b.String()
}

func benchmarkDecode(b *testing.B, f Format) {
	body := benchBody(f)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := Decode(f, strings.NewReader(body), DefaultLimits(), memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		d.Release()
	}
}

func BenchmarkDecodeJSONLines(b *testing.B) { benchmarkDecode(b, JSONLines) }
func BenchmarkDecodeCSV(b *testing.B)       { benchmarkDecode(b, CSV) }

// BenchmarkDecodeJSONLinesSmall decodes the first 40 KB of lines of the
// same body, a request's worth: what each request costs beside its
// bytes (the daemon's HTTP benchmark posts bodies of this size).
func BenchmarkDecodeJSONLinesSmall(b *testing.B) {
	body := benchBody(JSONLines)
	body = body[:40<<10+strings.IndexByte(body[40<<10:], '\n')+1] // whole lines
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := Decode(JSONLines, strings.NewReader(body), DefaultLimits(), memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		d.Release()
	}
}

// BenchmarkScanLine is the scanner alone (jsonscan.go) over the lines
// of BenchmarkDecodeJSONLines's body: its share of the decoder's time.
func BenchmarkScanLine(b *testing.B) {
	lines := bytes.Split([]byte(benchBody(JSONLines)), []byte("\n"))
	b.SetBytes(int64(len(bytes.Join(lines, nil))))
	b.ReportAllocs()
	var s lineScanner
	for b.Loop() {
		for _, line := range lines {
			if len(line) > 0 && s.scanLine(line) != lineObject {
				b.Fatalf("%q: not an object", line)
			}
		}
	}
}
