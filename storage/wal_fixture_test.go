package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Test support shared by host_test.go, wal_integration_test.go,
// wal_parquet_integration_test.go and the benchmarks: units whose every
// row names the unit (uid) and whose payload is a pure function of (uid,
// row), a host on gofakes3 (with or without sinks), and a reader that
// finds units in the segments a host owns.

// walNamespaces are the six namespaces of the workload.
var walNamespaces = []string{"orders", "events", "pageviews", "sessions", "inventory", "metrics"}

var walSchema = arrow.NewSchema([]arrow.Field{
	{Name: "uid", Type: arrow.BinaryTypes.String},
	{Name: "row", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: arrow.BinaryTypes.Binary},
}, nil)

var walFingerprint = segment.FingerprintOf(walSchema)

// walKey is the partition key of namespace ns.
func walKey(ns string) segment.PartitionKey {
	return segment.PartitionKey{SinkRef: "lake", Namespace: ns, Partition: "0", Schema: walFingerprint}
}

// walPayload is row r's payload of unit uid: payloadBytes bytes that a
// reader can recompute.
func walPayload(uid string, r, payloadBytes int) []byte {
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(r))
	sum := sha256.Sum256(append([]byte(uid), seed[:]...))
	return bytes.Repeat(sum[:], payloadBytes/len(sum)+1)[:payloadBytes]
}

// walBatch builds unit uid's batch. The caller releases it.
func walBatch(uid string, rows, payloadBytes int) arrow.RecordBatch {
	return walBatchIn(memory.DefaultAllocator, uid, rows, payloadBytes)
}

func walBatchIn(mem memory.Allocator, uid string, rows, payloadBytes int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, walSchema)
	defer b.Release()
	uids := b.Field(0).(*array.StringBuilder)
	ords := b.Field(1).(*array.Int64Builder)
	pays := b.Field(2).(*array.BinaryBuilder)
	for r := range rows {
		uids.Append(uid)
		ords.Append(int64(r))
		pays.Append(walPayload(uid, r, payloadBytes))
	}
	return b.NewRecordBatch()
}

// walSpec describes a unit well enough to build it again and to check it.
type walSpec struct {
	uid          string
	ns           string
	rows         int
	payloadBytes int
}

// unit builds the unit (without offsets or idempotency key). The caller
// releases its batches.
func (s walSpec) unit() engine.Unit {
	return engine.Unit{
		Key:     walKey(s.ns),
		Schema:  walSchema,
		Batches: []arrow.RecordBatch{walBatch(s.uid, s.rows, s.payloadBytes)},
	}
}

func releaseUnit(u engine.Unit) {
	for _, b := range u.Batches {
		b.Release()
	}
}

// walConfig is a small engine configuration for tests: segments of a few
// hundred KiB, 64 KiB multipart parts (so bigger bodies go multipart),
// orphans swept at once, and a fence wait just above the store's request
// timeout (the contract engine.Config.FenceWait states).
func walConfig(pipeline string, requestTimeout time.Duration) engine.Config {
	return engine.Config{
		Pipeline:            pipeline,
		TargetBytes:         256 << 10,
		MaxDelay:            2 * time.Second,
		QueueCapacity:       16,
		PartBytes:           64 << 10,
		PartConcurrency:     4,
		RetryBase:           20 * time.Millisecond,
		RetryMax:            400 * time.Millisecond,
		FenceWait:           requestTimeout + requestTimeout/4,
		OrphanGrace:         0,
		RecoveryConcurrency: 8,

		CompactionConcurrency: 4,
		LiveSegmentsMax:       engine.DefaultLiveSegmentsMax,
		BitmapDelay:           50 * time.Millisecond,
		IdempotencyWindow:     time.Hour,
		StreamChunkBytes:      1 << 20,
		MemoryPoll:            time.Second,
		SweepInterval:         time.Second,
		CheckpointDelay:       50 * time.Millisecond,
	}
}

// newClientVia is newTestClient with its HTTP requests sent through rt.
func newClientVia(endpoint string, rt http.RoundTripper) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDSKIPPRDTEST", "skipprd-test-secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		HTTPClient:                 &http.Client{Transport: rt},
	})
}

// newWALHost returns a host for cfg on a fresh loop, with an S3Store over
// client and an OSDisk on a fresh, empty directory (S3 mode never trusts
// local disk). The host is killed at cleanup if still running.
func newWALHost(t testing.TB, cfg engine.Config, client *s3.Client, requestTimeout time.Duration) *Host {
	t.Helper()
	return newWALHostWith(t, cfg, client, requestTimeout, nil)
}

// newWALHostWith is newWALHost with destinations: sinksOf builds them on
// the host's own loop and store, as the daemon does (nil: no sinks, so
// nothing is compacted and every committed segment stays owned).
func newWALHostWith(t testing.TB, cfg engine.Config, client *s3.Client, requestTimeout time.Duration, sinksOf func(*Loop, *S3Store) engine.Sinks) *Host {
	t.Helper()
	l := NewLoop()
	store := NewS3Store(l, client, testBucket, S3Options{RequestTimeout: requestTimeout})
	disk, err := NewOSDisk(l, t.TempDir(), DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hp := HostPorts{Store: store, Disk: disk}
	if sinksOf != nil {
		hp.Sinks = sinksOf(l, store)
	}
	h, err := NewHost(cfg, l, hp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	return h
}

// ownedUnit is where a unit was found in the owned segments.
type ownedUnit struct {
	seg  engine.SnapshotID
	ns   string
	rows int
}

// readOwned reads every segment h owns through client — body GET,
// CheckBody against the marker's index, ReadSlice of every PART — and
// returns the units it holds by uid. It reports (t.Errorf) a unit in two
// segments, a unit whose rows are not exactly its spec's (a duplicate
// inside one segment, or a torn unit), a payload that is not the one
// written, a uid no spec names, and a unit in a namespace not its own.
func readOwned(t testing.TB, ctx context.Context, client *s3.Client, h *Host, specs func(uid string) (walSpec, bool)) map[string]ownedUnit {
	t.Helper()
	segs, err := h.Segments(ctx)
	if err != nil {
		t.Fatalf("segments: %v", err)
	}
	owned := map[string]ownedUnit{}
	for _, s := range segs {
		inSeg := readSegment(t, ctx, client, h.Layout().Key(s.Dir, s.ID, engine.KindBody), s.Index)
		for uid, u := range inSeg {
			if prev, ok := owned[uid]; ok {
				t.Errorf("unit %s is in segment %s and in segment %s", uid, prev.seg, s.ID)
				continue
			}
			u.seg = s.ID
			spec, ok := specs(uid)
			switch {
			case !ok:
				t.Errorf("segment %s holds unit %s, which nobody submitted", s.ID, uid)
			case u.rows != spec.rows:
				t.Errorf("segment %s holds %d rows of unit %s, it has %d", s.ID, u.rows, uid, spec.rows)
			case u.ns != spec.ns:
				t.Errorf("segment %s holds unit %s under namespace %s, it belongs to %s", s.ID, uid, u.ns, spec.ns)
			}
			owned[uid] = u
		}
	}
	return owned
}

// readSegment GETs one body and returns the rows per uid it holds.
func readSegment(t testing.TB, ctx context.Context, client *s3.Client, key string, marker *segment.Index) map[string]ownedUnit {
	t.Helper()
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get body %s: %v", key, err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatalf("read body %s: %v", key, err)
	}
	b, err := segment.CheckBody(marker, key, segment.Bytes(body), int64(len(body)))
	if err != nil {
		t.Fatalf("body %s does not match its marker: %v", key, err)
	}
	units := map[string]ownedUnit{}
	for _, e := range b.Index.Entries {
		sl, err := b.ReadSlice(e.Ordinal, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("read slice %d of %s: %v", e.Ordinal, key, err)
		}
		for _, rec := range sl.Batches {
			collectRows(t, key, e.Key.Namespace, rec, units)
		}
		sl.Release()
	}
	return units
}

func collectRows(t testing.TB, key, ns string, rec arrow.RecordBatch, units map[string]ownedUnit) {
	uids := rec.Column(0).(*array.String)
	ords := rec.Column(1).(*array.Int64)
	pays := rec.Column(2).(*array.Binary)
	for i := range int(rec.NumRows()) {
		uid := uids.Value(i)
		u := units[uid]
		if u.rows == 0 {
			u.ns = ns
		} else if u.ns != ns {
			t.Errorf("%s: unit %s in namespaces %s and %s", key, uid, u.ns, ns)
		}
		if p := pays.Value(i); !bytes.Equal(p, walPayload(uid, int(ords.Value(i)), len(p))) {
			t.Errorf("%s: unit %s row %d has another payload", key, uid, ords.Value(i))
		}
		u.rows++
		units[uid] = u
	}
}

// gate is an http.RoundTripper that holds the requests hold matches until
// open is called, to put the engine in a chosen crash window. A held
// request whose context ends (Kill closes the store) returns at once;
// with land set, it is still sent once the gate opens — a request that
// reached the store although its sender gave up on it.
type gate struct {
	base http.RoundTripper
	hold func(*http.Request) bool
	land bool

	arrived chan string   // the path of each held request
	landed  chan string   // the path of each request sent after its context ended
	opened  chan struct{} // closed by open
	once    sync.Once
}

func newGate(hold func(*http.Request) bool, land bool) *gate {
	return &gate{
		base: http.DefaultTransport, hold: hold, land: land,
		arrived: make(chan string, 1024), landed: make(chan string, 1024), opened: make(chan struct{}),
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.opened) }) }

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-g.opened:
		return g.base.RoundTrip(req)
	default:
	}
	if !g.hold(req) {
		return g.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	g.arrived <- req.URL.Path
	select {
	case <-g.opened:
	case <-req.Context().Done():
	}
	if req.Context().Err() == nil {
		return g.base.RoundTrip(withBody(req, req.Context(), body))
	}
	// The sender gave up (both may be ready when this goroutine wakes:
	// the context decides, so a killed request always takes this path).
	if g.land {
		late := withBody(req, context.WithoutCancel(req.Context()), body)
		go func() {
			<-g.opened
			if resp, err := g.base.RoundTrip(late); err == nil {
				resp.Body.Close()
			}
			g.landed <- late.URL.Path
		}()
	}
	return nil, req.Context().Err()
}

func withBody(req *http.Request, ctx context.Context, body []byte) *http.Request {
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r
}

// isMarkerPut matches the PUT of a commit marker.
func isMarkerPut(req *http.Request) bool {
	return req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, ".seg.commit")
}

// isSegmentWrite matches every write of a segment object (body, parts,
// marker), not the writer object.
func isSegmentWrite(req *http.Request) bool {
	return (req.Method == http.MethodPut || req.Method == http.MethodPost) && strings.Contains(req.URL.Path, "/p_year=")
}

// uidf names unit seq of stream g.
func uidf(g int, seq uint64) string { return fmt.Sprintf("g%02d-%06d", g, seq) }

// ingestUntilTaken submits u until the host takes it, sleeping pause after
// each ErrResourceExhausted (backpressure: retry later). It returns how
// many refusals it met, and any other error.
func ingestUntilTaken(ctx context.Context, h *Host, u engine.Unit, pause time.Duration) (int64, error) {
	var refused int64
	for {
		err := h.Ingest(ctx, u)
		if !errors.Is(err, engine.ErrResourceExhausted) {
			return refused, err
		}
		refused++
		time.Sleep(pause)
	}
}
