package storage

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Host contract tests, on gofakes3 through the real SDK client. Each
// recovery waits the fence (hostRequestTimeout·1.25), so the tests run in
// parallel.

const hostRequestTimeout = 500 * time.Millisecond

// hostFixture is one gofakes3 backend and the test's own client to it.
type hostFixture struct {
	endpoint string
	client   *s3.Client // the test's reads; never gated
	specs    map[string]walSpec
	mu       sync.Mutex
}

func newHostFixture(t *testing.T) *hostFixture {
	srv := newFakeS3(t)
	return &hostFixture{endpoint: srv.URL, client: newTestClient(srv.URL), specs: map[string]walSpec{}}
}

// host returns a host whose requests go through rt (nil: direct).
func (f *hostFixture) host(t *testing.T, rt http.RoundTripper) *Host {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return newWALHost(t, walConfig("host-test", hostRequestTimeout), newClientVia(f.endpoint, rt), hostRequestTimeout)
}

// unit builds and records a unit.
func (f *hostFixture) unit(uid, ns string) engine.Unit {
	s := walSpec{uid: uid, ns: ns, rows: 20, payloadBytes: 100}
	f.mu.Lock()
	f.specs[uid] = s
	f.mu.Unlock()
	return s.unit()
}

func (f *hostFixture) spec(uid string) (walSpec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.specs[uid]
	return s, ok
}

// ingest submits u on a goroutine; the answer arrives on the channel.
func ingest(ctx context.Context, h *Host, u engine.Unit) <-chan error {
	answer := make(chan error, 1)
	go func() {
		err := h.Ingest(ctx, u)
		releaseUnit(u) // before answering: a caller may check the allocator next
		answer <- err
	}()
	return answer
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startHost(t *testing.T, ctx context.Context, h *Host) {
	t.Helper()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
}

// mustIngest ingests u and requires an ack.
func mustIngest(t *testing.T, ctx context.Context, h *Host, u engine.Unit) {
	t.Helper()
	defer releaseUnit(u)
	if err := h.Ingest(ctx, u); err != nil {
		t.Fatalf("ingest: %v", err)
	}
}

// Before recovery has finished the engine refuses units with ErrNotReady,
// and the refusal is definite (the unit was submitted and answered).
func TestHostIngestBeforeStartIsNotReady(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	h := f.host(t, nil)
	u := f.unit("early", "orders")
	err := h.Ingest(ctx, u)
	releaseUnit(u)
	if !errors.Is(err, engine.ErrNotReady) || errors.Is(err, ErrUnanswered) {
		t.Fatalf("ingest before start: %v, want engine.ErrNotReady", err)
	}
	startHost(t, ctx, h)
	mustIngest(t, ctx, h, f.unit("after", "orders"))
	if err := h.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatalf("start after close: %v, want the first outcome (nil)", err)
	}
}

// Close before Start and queries after Close: nothing runs, nothing hangs.
func TestHostCloseBeforeStart(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	h := f.host(t, nil)
	if err := h.Close(ctx); err != nil {
		t.Fatalf("close before start: %v", err)
	}
	if err := h.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("start after close: %v, want ErrStopped", err)
	}
	u := f.unit("late", "orders")
	defer releaseUnit(u)
	if err := h.Ingest(ctx, u); !errors.Is(err, ErrStopped) || errors.Is(err, ErrUnanswered) {
		t.Fatalf("ingest after close: %v, want ErrStopped without ErrUnanswered", err)
	}
	if off, err := h.Offsets(ctx); err != nil || len(off) != 0 {
		t.Fatalf("offsets after close: %v %v, want an empty view", off, err)
	}
}

// Ingest returns nil only once the commit marker is in the store: while
// the marker PUT is held the body is there, the unit is not acked and the
// offsets view does not show it.
func TestHostAcksOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	g := newGate(isMarkerPut, false)
	h := f.host(t, g)
	startHost(t, ctx, h)
	u := f.unit("acked", "events")
	u.Offsets = segment.Offsets{{Key: "src/acked", Value: 7}}
	answer := ingest(ctx, h, u)
	markerPath := <-g.arrived
	bodyKey := strings.TrimSuffix(strings.TrimPrefix(markerPath, "/"+testBucket+"/"), ".commit")
	if _, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(bodyKey)}); err != nil {
		t.Fatalf("body %s not in the store while its marker is held: %v", bodyKey, err)
	}
	select {
	case err := <-answer:
		t.Fatalf("ingest answered %v before its marker was stored", err)
	case <-time.After(100 * time.Millisecond):
	}
	if off, err := h.Offsets(ctx); err != nil || len(off) != 0 {
		t.Fatalf("offsets before the commit: %v %v, want none", off, err)
	}
	g.open()
	if err := <-answer; err != nil {
		t.Fatalf("ingest: %v", err)
	}
	if _, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(bodyKey + ".commit")}); err != nil {
		t.Fatalf("acked, but the marker is not in the store: %v", err)
	}
	if off, _ := h.Offsets(ctx); !off.Covers(u.Offsets) {
		t.Fatalf("offsets after the ack: %v, want them to cover %v", off, u.Offsets)
	}
	owned := readOwned(t, ctx, f.client, h, f.spec)
	if _, ok := owned["acked"]; !ok || len(owned) != 1 {
		t.Fatalf("owned units %v, want exactly the acked one", owned)
	}
}

// Kill while units wait for their marker: their Ingest calls return
// ErrUnanswered (and ErrStopped), never nil and never a definite refusal.
// Whether the cancelled marker PUT reached the store or not, a new host
// recovers a consistent view, and resubmitting with the same idempotency
// key / offsets stores each unit exactly once.
func TestHostKillLeavesIngestUnanswered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		land bool // the marker PUT reaches the store after Kill
	}{{"marker-lost", false}, {"marker-landed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testKillUnanswered(t, tc.land)
		})
	}
}

func testKillUnanswered(t *testing.T, land bool) {
	f, ctx := newHostFixture(t), testCtx(t)
	g := newGate(isMarkerPut, land)
	h := f.host(t, g)
	startHost(t, ctx, h)
	idem := f.unit("idem-1", "orders")
	idem.IdempotencyKey = "order-1"
	replay := f.unit("replay-1", "events")
	replay.Offsets = segment.Offsets{{Key: "src/replay", Value: 1}}
	rebuild := func() (engine.Unit, engine.Unit) {
		i, r := f.unit("idem-1", "orders"), f.unit("replay-1", "events")
		i.IdempotencyKey, r.Offsets = idem.IdempotencyKey, replay.Offsets
		return i, r
	}
	answers := []<-chan error{ingest(ctx, h, idem), ingest(ctx, h, replay)}
	<-g.arrived // the first marker PUT is held; nothing is acked yet
	h.Kill()
	for i, a := range answers {
		if err := <-a; !errors.Is(err, ErrUnanswered) || !errors.Is(err, ErrStopped) {
			t.Fatalf("unit %d at kill: %v, want ErrUnanswered and ErrStopped", i, err)
		}
	}
	u := f.unit("after-kill", "orders")
	if err := h.Ingest(ctx, u); !errors.Is(err, ErrStopped) || errors.Is(err, ErrUnanswered) {
		t.Fatalf("ingest after kill: %v, want ErrStopped without ErrUnanswered", err)
	}
	releaseUnit(u)
	if st, err := h.Stats(ctx); err != nil || st.UnitsSubmitted < 2 || st.UnitsAcked != 0 {
		t.Fatalf("stats after kill: %+v %v, want 2 units submitted and none acked", st, err)
	}
	g.open()
	if land {
		<-g.landed
	}

	h2 := f.host(t, nil)
	startHost(t, ctx, h2)
	off, err := h2.Offsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := readOwned(t, ctx, f.client, h2, f.spec)
	idemSeen, err := h2.IdempotencyKeyKnown(ctx, idem.IdempotencyKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before["idem-1"]; ok != idemSeen {
		t.Fatalf("after recovery: idempotency key recorded %v, unit owned %v", idemSeen, ok)
	}
	if !land && len(before) != 0 {
		t.Fatalf("the marker never reached the store, yet %d units are owned", len(before))
	}
	i2, r2 := rebuild()
	mustIngest(t, ctx, h2, i2)
	if !off.Covers(r2.Offsets) {
		mustIngest(t, ctx, h2, r2) // resume from the recovered offsets
	} else {
		releaseUnit(r2)
	}
	after := readOwned(t, ctx, f.client, h2, f.spec)
	for _, uid := range []string{"idem-1", "replay-1"} {
		if _, ok := after[uid]; !ok {
			t.Errorf("unit %s not owned after resubmission", uid)
		}
	}
	if err := h2.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// Close commits and acks every unit the engine holds — live, sealed or
// being persisted — before it returns; later units are refused.
func TestHostCloseCommitsPendingUnits(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	g := newGate(isSegmentWrite, false)
	h := f.host(t, g)
	startHost(t, ctx, h)
	const n = 8
	var answers []<-chan error
	for i := range n {
		u := f.unit(uidf(i, 1), walNamespaces[i%len(walNamespaces)])
		u.Offsets = segment.Offsets{{Key: uidf(i, 0), Value: 1}}
		answers = append(answers, ingest(ctx, h, u))
	}
	waitStats(t, ctx, h, func(s engine.Stats) bool { return s.UnitsSubmitted == n })
	closed := make(chan error, 1)
	go func() { closed <- h.Close(ctx) }()
	time.Sleep(50 * time.Millisecond)
	for i, a := range answers {
		select {
		case err := <-a:
			t.Fatalf("unit %d answered %v while every segment write is held", i, err)
		default:
		}
	}
	g.open()
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	for i, a := range answers {
		select {
		case err := <-a:
			if err != nil {
				t.Fatalf("unit %d: %v, want an ack by Close", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("unit %d: no answer after Close returned", i)
		}
	}
	h2 := f.host(t, nil)
	startHost(t, ctx, h2)
	if owned := readOwned(t, ctx, f.client, h2, f.spec); len(owned) != n {
		t.Fatalf("%d units owned after close and recovery, want %d", len(owned), n)
	}
	_ = h2.Close(ctx)
}

// A Close whose context ends first kills the host: units still held are
// unanswered, and Close reports the context's error.
func TestHostCloseDeadlineKills(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	g := newGate(isSegmentWrite, false)
	h := f.host(t, g)
	startHost(t, ctx, h)
	answer := ingest(ctx, h, f.unit("held", "metrics"))
	<-g.arrived
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := h.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close past its deadline: %v, want DeadlineExceeded", err)
	}
	if err := <-answer; !errors.Is(err, ErrUnanswered) {
		t.Fatalf("unit held at the deadline: %v, want ErrUnanswered", err)
	}
	g.open()
}

// An Ingest whose context ends while the unit is pending returns
// ErrUnanswered; the engine still commits the unit.
func TestHostIngestContextEndsWhilePending(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	g := newGate(isMarkerPut, false)
	h := f.host(t, g)
	startHost(t, ctx, h)
	short, cancel := context.WithCancel(ctx)
	u := f.unit("impatient", "sessions")
	u.IdempotencyKey = "impatient"
	answer := ingest(short, h, u)
	<-g.arrived
	cancel()
	if err := <-answer; !errors.Is(err, ErrUnanswered) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ingest with a cancelled context: %v, want ErrUnanswered and Canceled", err)
	}
	g.open()
	// A retry with the same key joins or finds the pending unit.
	u2 := f.unit("impatient", "sessions")
	u2.IdempotencyKey = "impatient"
	mustIngest(t, ctx, h, u2)
	if owned := readOwned(t, ctx, f.client, h, f.spec); len(owned) != 1 {
		t.Fatalf("owned %v, want the unit once", owned)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// waitStats polls the host's stats until ok.
func waitStats(t *testing.T, ctx context.Context, h *Host, ok func(engine.Stats) bool) {
	t.Helper()
	for {
		s, err := h.Stats(ctx)
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		if ok(s) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The caller may release its batches as soon as Ingest returns, whatever
// the answer, and after Close nothing holds them any more: acked units
// (released by the engine after the commit), refused ones (never
// retained) and ones never submitted (released by the host).
func TestHostReleasesBatches(t *testing.T) {
	t.Parallel()
	f, ctx := newHostFixture(t), testCtx(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	h := f.host(t, nil)
	unit := func(uid string) engine.Unit {
		u := f.unit(uid, "inventory") // records the spec
		releaseUnit(u)
		u.Batches = []arrow.RecordBatch{walBatchIn(mem, uid, 20, 100)}
		return u
	}
	u := unit("refused")
	if err := h.Ingest(ctx, u); !errors.Is(err, engine.ErrNotReady) {
		t.Fatalf("ingest before start: %v", err)
	}
	releaseUnit(u)
	startHost(t, ctx, h)
	var answers []<-chan error
	for i := range 4 {
		answers = append(answers, ingest(ctx, h, unit(uidf(i, 1))))
	}
	for _, a := range answers {
		if err := <-a; err != nil {
			t.Fatalf("ingest: %v", err)
		}
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	u = unit("never-submitted")
	if err := h.Ingest(ctx, u); !errors.Is(err, ErrStopped) {
		t.Fatalf("ingest after close: %v", err)
	}
	releaseUnit(u)
	mem.AssertSize(t, 0)
}
