package nodetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"
)

// LiveRead is what the live view showed at one moment (live.mjs reads
// it from the page's elements).
type LiveRead struct {
	Status                             string
	Stale                              bool // panels dimmed: the daemon stopped answering
	Acked, SinceOpen, Polls            uint64
	TapeSegments, SegDivs, Parts, Kept int
	TapeEmpty                          string // the tape's "no live segment" note, if shown
	Bits, BitRows                      int
	BitmapsEmpty                       string
	ChartLines, MemoryBars             int
	Chart, Memory, Namespaces, Alerts  string
	Waiting                            string            // the lanes whose rows wait for a file
	Errors                             map[string]string // panel → the error it shows ("" if none)
}

// Broken lists the panels that show an error.
func (r LiveRead) Broken() []string {
	var out []string
	for _, p := range []string{"counters", "tape", "bitmaps", "chart", "memory", "namespaces", "alerts"} {
		if e, ok := r.Errors[p]; !ok || e != "" {
			out = append(out, p+": "+e)
		}
	}
	return out
}

// LivePage is the live view open in one tab of a headless Chromium,
// driven by live.mjs one command at a time.
type LivePage struct {
	t      testing.TB
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
	wait   func() error
	closed sync.Once
	// Outside lists the requests the page made to any other origin.
	Outside []string
}

// OpenLive opens url in chromium (a browser binary). The page is closed
// at the test's end if not before.
func OpenLive(t testing.TB, chromium, url string) *LivePage {
	t.Helper()
	cmd := nodeCmd(t, "playwright-core", []string{"CHROMIUM=" + chromium}, "live.mjs", url)
	p := &LivePage{t: t, stderr: &bytes.Buffer{}, wait: cmd.Wait}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(nil, 1<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	var ready struct{ Ready bool }
	p.answer("open "+url, &ready)
	return p
}

// Until reads the page until its status starts with status, for at most
// within; the last read either way.
func (p *LivePage) Until(status string, within time.Duration) LiveRead {
	var a struct{ Read LiveRead }
	p.do(map[string]any{"op": "until", "status": status, "ms": within.Milliseconds()}, &a)
	return a.Read
}

// Watch reads the page every 200 ms for d — and on, up to upTo, while
// the count named until (a LiveRead field, in live.mjs's spelling, e.g.
// "bits") was 0 in every read: the first read, the last, and the most of
// each count any read saw.
func (p *LivePage) Watch(d, upTo time.Duration, until string) (first, last, most LiveRead) {
	var a struct{ First, Last, Most LiveRead }
	p.do(map[string]any{"op": "watch", "ms": d.Milliseconds(), "max": upTo.Milliseconds(), "until": until}, &a)
	return a.First, a.Last, a.Most
}

// Shot saves a full-page screenshot to path.
func (p *LivePage) Shot(path string) {
	p.do(map[string]any{"op": "shot", "path": path}, &struct{}{})
}

// Close closes the browser.
func (p *LivePage) Close() {
	p.closed.Do(func() {
		_, _ = p.stdin.Write([]byte(`{"op":"close"}` + "\n"))
		_ = p.stdin.Close()
		if err := p.wait(); err != nil {
			p.t.Errorf("live.mjs: %v\n%s", err, p.stderr.String())
		}
	})
}

func (p *LivePage) do(cmd map[string]any, into any) {
	p.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("live.mjs %s: %v\n%s", b, err, p.stderr.String())
	}
	p.answer(string(b), into)
}

// answer reads one answer line into into.
func (p *LivePage) answer(what string, into any) {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("live.mjs %s: no answer (%v)\n%s", what, p.out.Err(), p.stderr.String())
	}
	line := p.out.Bytes()
	var meta struct {
		Error   string
		Outside []string
	}
	if err := json.Unmarshal(line, &meta); err != nil {
		p.t.Fatalf("live.mjs %s: %v: %.2000s", what, err, line)
	}
	if meta.Error != "" {
		p.t.Fatalf("live.mjs %s: %s", what, meta.Error)
	}
	p.Outside = meta.Outside
	if err := json.Unmarshal(line, into); err != nil {
		p.t.Fatalf("live.mjs %s: %v: %.2000s", what, err, line)
	}
}
