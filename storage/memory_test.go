package storage

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/logbuf"
)

// A real /proc/meminfo (Linux 6.x, 24 GiB machine), trimmed after the
// fields the parser could trip over: a line without a unit, huge pages.
const meminfoSample = `MemTotal:       24684092 kB
MemFree:        23201200 kB
MemAvailable:   24196108 kB
Buffers:           51456 kB
Cached:          1121424 kB
SwapCached:            0 kB
Active:           613572 kB
Inactive:         628824 kB
Unevictable:           0 kB
Mlocked:               0 kB
SwapTotal:             0 kB
SwapFree:              0 kB
Dirty:               148 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
DirectMap1G:    23068672 kB
`

// A kernel older than 3.14 (no MemAvailable).
const meminfoOldKernel = `MemTotal:        2048000 kB
MemFree:          512000 kB
Buffers:           10240 kB
Cached:           204800 kB
`

func TestParseMemAvailable(t *testing.T) {
	ok := []struct {
		name string
		in   string
		want int64
	}{
		{"real file", meminfoSample, 24196108 * 1024},
		{"first line", "MemAvailable: 1 kB\n", 1024},
		{"no trailing newline", "MemTotal: 9 kB\nMemAvailable: 2 kB", 2048},
		{"zero under pressure", "MemAvailable:          0 kB\n", 0},
		{"tabs", "MemAvailable:\t\t7 kB\n", 7 * 1024},
		{"largest that fits", "MemAvailable: 9007199254740991 kB\n", 9007199254740991 * 1024},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMemAvailable(strings.NewReader(c.in))
			if err != nil || got != c.want {
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
	bad := []struct{ name, in string }{
		{"empty", ""},
		{"old kernel without MemAvailable", meminfoOldKernel},
		{"binary junk", "\x00\x01\xffMemAvailable\x00"},
		{"no number", "MemAvailable:  kB\n"},
		{"no unit", "MemAvailable: 12345\n"},
		{"wrong unit", "MemAvailable: 12345 MB\n"},
		{"negative", "MemAvailable: -5 kB\n"},
		{"hex", "MemAvailable: 0x10 kB\n"},
		{"extra field", "MemAvailable: 1 2 kB\n"},
		{"overflows int64 as kB", "MemAvailable: 9007199254740992 kB\n"},
		{"overflows int64", "MemAvailable: 99999999999999999999 kB\n"},
		{"repeated", "MemAvailable: 1 kB\nMemAvailable: 2 kB\n"},
		{"prefix only", "MemAvailableX: 5 kB\n"},
		{"line too long", "MemTotal: " + strings.Repeat("9", 300) + " kB\nMemAvailable: 1 kB\n"},
		{"beyond the read bound", strings.Repeat("Junk: 1 kB\n", meminfoBytesMax/11+1) + "MemAvailable: 1 kB\n"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMemAvailable(strings.NewReader(c.in))
			if !errors.Is(err, ErrMemoryUnknown) {
				t.Fatalf("got %d, %v; want ErrMemoryUnknown", got, err)
			}
		})
	}
}

// The parser never reads past its bound, whatever the reader holds.
func TestParseMemAvailableReadsBounded(t *testing.T) {
	r := &countingReader{r: infiniteJunk{}}
	if _, err := ParseMemAvailable(r); !errors.Is(err, ErrMemoryUnknown) {
		t.Fatalf("endless junk: %v", err)
	}
	if r.n > meminfoBytesMax {
		t.Fatalf("read %d bytes, bound %d", r.n, meminfoBytesMax)
	}
}

type infiniteJunk struct{}

func (infiniteJunk) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = "Junk: 1 kB\n"[i%11]
	}
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestCgroupHeadroom(t *testing.T) {
	const statV2 = "anon 104857600\nfile 314572800\nactive_file 104857600\ninactive_file 209715200\nslab 1048576\n"
	const statV1 = "cache 314572800\nrss 104857600\ntotal_cache 314572800\ntotal_inactive_file 209715200\n"
	cases := []struct {
		name                string
		limit, usage, stat  string
		key                 string
		want                int64
		wantLimited, wantOK bool
	}{
		{"v2 unlimited", "max\n", "419430400\n", statV2, "inactive_file", 0, false, true},
		// 1 GiB limit, 400 MiB used of which 200 MiB inactive file cache.
		{"v2 limited", "1073741824\n", "419430400\n", statV2, "inactive_file", 1073741824 - 209715200, true, true},
		{"v1 limited", "1073741824\n", "419430400\n", statV1, "total_inactive_file", 1073741824 - 209715200, true, true},
		{"v1 unlimited is huge", "9223372036854771712\n", "419430400\n", statV1, "total_inactive_file", 9223372036854771712 - 209715200, true, true},
		{"over the limit", "104857600\n", "419430400\n", "", "inactive_file", 0, true, true},
		{"stat without the key", "1000\n", "400\n", "anon 1\n", "inactive_file", 600, true, true},
		{"junk limit", "lots\n", "1\n", "", "inactive_file", 0, false, false},
		{"junk usage", "1000\n", "-1\n", "", "inactive_file", 0, false, false},
		{"junk stat", "1000\n", "1\n", "inactive_file x\n", "inactive_file", 0, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, limited, err := cgroupHeadroom([]byte(c.limit), []byte(c.usage), []byte(c.stat), c.key)
			if (err == nil) != c.wantOK || limited != c.wantLimited || got != c.want {
				t.Fatalf("got %d limited=%v err=%v; want %d limited=%v ok=%v", got, limited, err, c.want, c.wantLimited, c.wantOK)
			}
		})
	}
}

// SystemMemory answers the fallback while the probe fails, logs each
// change between failing and working once, and re-reads at most once per
// refresh interval.
func TestSystemMemoryFallbackAndRefresh(t *testing.T) {
	var logs logbuf.Buffer
	m := NewSystemMemory(MemoryFallbackBytes, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	reads, value, fail := 0, int64(8<<30), true
	m.read = func() (int64, error) {
		reads++
		if fail {
			return 0, ErrMemoryUnknown
		}
		return value, nil
	}
	if got := m.AvailableBytes(); got != MemoryFallbackBytes {
		t.Fatalf("failing probe: %d, want the fallback", got)
	}
	m.AvailableBytes() // cached: no read
	now = now.Add(memoryRefreshInterval)
	m.AvailableBytes() // read, still failing: not logged again
	fail = false
	now = now.Add(memoryRefreshInterval)
	if got := m.AvailableBytes(); got != value {
		t.Fatalf("working probe: %d, want %d", got, value)
	}
	value = 4 << 30
	if got := m.AvailableBytes(); got != 8<<30 {
		t.Fatalf("within the interval: %d, want the cached value", got)
	}
	if reads != 3 {
		t.Fatalf("%d reads, want 3", reads)
	}
	out := logs.String()
	if strings.Count(out, "memory probe failed") != 1 || strings.Count(out, "works again") != 1 {
		t.Fatalf("logs:\n%s", out)
	}
}

// On the platforms with a probe it answers something plausible here.
func TestReadMemoryOnThisMachine(t *testing.T) {
	v, err := ReadMemory()
	if errors.Is(err, ErrMemoryUnknown) && strings.Contains(err.Error(), "no memory probe") {
		t.Skipf("no probe on this platform: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if v <= 0 || v > math.MaxInt64/2 {
		t.Fatalf("available memory %d bytes", v)
	}
}
