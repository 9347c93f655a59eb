package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// End to end through the HTTP source: the real daemon on a loopback
// port, many clients posting JSON lines with their Idempotency-Keys, and
// the daemon SIGKILLed mid-flight several times. A client retries each
// request with the same key and body until it is answered 200 (across
// refused connections, 503s while recovering and 429s), and some again
// after their 200, as a client that lost the answer would. At the end every
// row of every 200'd request is in the lake exactly once, and nothing
// else is.
func TestDaemonHTTPKills(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-ingest (about 20 s)")
	t.Parallel()
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake}\n"+
		"sources:\n  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\", token_env: E2E_TOKEN}\n")
	env := []string{envPipelineFile + "=" + pipeline, "E2E_TOKEN=t0ken"}

	var addr atomic.Value // the current daemon's address; "" between runs
	addr.Store("")
	start := func() *proc {
		p := startDaemon(t, bin, dataDir, env...)
		p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
		addr.Store(listenAddr(p.stderrLines()))
		return p
	}
	const clients, requests = 16, 30
	p := start()
	var wg sync.WaitGroup
	acked := make([][]string, clients) // ids of rows answered 200, per client
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests {
				acked[c] = append(acked[c], postUntilAcked(t, &addr, c, i)...)
				if (c+i)%4 == 0 {
					// A retry after the answer (a client that lost it):
					// answered 200 again, stored once.
					postUntilAcked(t, &addr, c, i)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for kill := range 8 {
		time.Sleep(50*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond))))
		addr.Store("")
		p.kill(t)
		t.Logf("kill %d", kill)
		p = start()
	}
	wg.Wait()
	// Stopped before its recovery finished, a daemon leaves what it
	// recovered in the WAL for the next start, not in the lake.
	p.waitStderr(t, "the last run's recovery", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	p.stop(t)

	var want []string
	for _, ids := range acked {
		want = append(want, ids...)
	}
	slices.Sort(want)
	got := lakeIDs(t, filepath.Join(dataDir, "lake"))["events"]
	if !slices.Equal(got, want) {
		t.Fatalf("lake holds %d rows, the 200'd requests %d: %s", len(got), len(want), firstDiff(got, want))
	}
	if len(want) == 0 {
		t.Fatal("nothing was acked")
	}
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listenAddr finds the HTTP source's address in the daemon's log.
func listenAddr(lines []string) string {
	line := findLine(lines, "kind=http")
	_, a, ok := strings.Cut(line, "listen=")
	if !ok {
		return ""
	}
	a, _, _ = strings.Cut(a, " ")
	return a
}

// postUntilAcked posts client c's request i — its rows and key are a
// function of (c, i) — until it is answered 200, and returns its ids.
func postUntilAcked(t *testing.T, addr *atomic.Value, c, i int) []string {
	r := ingestRequest{ns: "events", key: fmt.Sprintf("client-%d-request-%d", c, i), token: "t0ken"}
	var body bytes.Buffer
	for n := range 1 + (c*31+i*17)%20 {
		r.ids = append(r.ids, fmt.Sprintf("c%02d-%03d-%02d", c, i, n))
		fmt.Fprintf(&body, `{"id":%q,"n":%d,"src":%d}`+"\n", r.ids[n], n, c)
	}
	r.body = body.Bytes()
	if !postAcked(t, addr, r) {
		return nil
	}
	return r.ids
}

// ingestRequest is one request to the HTTP source: its namespace, key,
// bearer token ("" for none), JSON-lines body and the ids of its rows.
type ingestRequest struct {
	ns, key, token string
	body           []byte
	ids            []string
}

// ingestClient bounds one attempt: a request may wait for a segment
// commit or a recovery fence; an attempt that times out is sent again
// with the same key, like a cut one.
var ingestClient = &http.Client{Timeout: 30 * time.Second}

// postAcked posts r to the daemon at addr until it is answered 200
// stating r's row count, retrying with the same key and body across
// refused connections, cut requests, 503s and 429s (an empty address: no
// daemon listens now). It reports false (and fails t) for any other
// answer, or none within e2eWait.
func postAcked(t *testing.T, addr *atomic.Value, r ingestRequest) bool {
	deadline := time.Now().Add(e2eWait)
	for time.Now().Before(deadline) {
		a := addr.Load().(string)
		if a == "" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+a+"/v1/ingest/"+r.ns, bytes.NewReader(r.body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Idempotency-Key", r.key)
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		resp, err := ingestClient.Do(req)
		if err != nil {
			time.Sleep(20 * time.Millisecond) // refused, or cut by a kill: retry
			continue
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var ans struct{ Rows int }
			if err := json.Unmarshal(msg, &ans); err != nil || ans.Rows != len(r.ids) {
				t.Errorf("%s request %s (%d rows) answered 200 %s", r.ns, r.key, len(r.ids), msg)
				return false
			}
			return true
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			time.Sleep(50 * time.Millisecond) // recovering, or backpressure
		default:
			t.Errorf("%s request %s answered %d: %s", r.ns, r.key, resp.StatusCode, msg)
			return false
		}
	}
	t.Errorf("%s request %s not acked within %v", r.ns, r.key, e2eWait)
	return false
}
