package postgrescdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/logbuf"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/storage"
)

// testSink is the sink every unit of a test goes to.
const testSink = "lake"

// pgEnv is a test's database on the real server: logical replication,
// a slot and publication named for the test. The slot is dropped when
// the test ends (before the database: a database with a slot cannot be
// dropped, and a slot left behind holds WAL for good).
type pgEnv struct {
	t    testing.TB
	url  string
	db   *pgx.Conn
	slot string
	pub  string
}

func newPGEnv(t testing.TB) *pgEnv {
	t.Helper()
	pgtest.RequireLogical(t)
	url := pgtest.Database(t)
	var b [5]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	e := &pgEnv{t: t, url: url, slot: "skipprd_t_" + suffix, pub: "pub_" + suffix}
	t.Cleanup(e.dropSlot)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	e.db = conn
	return e
}

// otherSlot returns another slot name for the test, dropped at cleanup
// (before the database).
func (e *pgEnv) otherSlot(t *testing.T) string {
	other := &pgEnv{t: t, slot: e.slot + "_2"}
	t.Cleanup(other.dropSlot)
	return other.slot
}

// dropSlot drops the test's slot, waiting for a connection still using
// it to go away.
func (e *pgEnv) dropSlot() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		e.t.Errorf("drop slot %s: connect: %v", e.slot, err)
		return
	}
	defer admin.Close(context.Background())
	for {
		_, err := admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", e.slot)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			e.t.Errorf("drop slot %s: %v (drop it by hand: it holds WAL)", e.slot, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exec runs statements, failing the test on an error; it returns the
// rows the last one affected.
func (e *pgEnv) exec(sqls ...string) int64 {
	e.t.Helper()
	var n int64
	for _, q := range sqls {
		tag, err := e.db.Exec(context.Background(), q)
		if err != nil {
			e.t.Fatalf("%s: %v", q, err)
		}
		n = tag.RowsAffected()
	}
	return n
}

// config is a source configuration for the env with small chunks.
func (e *pgEnv) config(tables ...string) Config {
	return Config{
		URL: e.url, Publication: e.pub, Slot: e.slot, Tables: tables, SinkRef: testSink,
		UnitRows: 400, ChunkRows: 50, FlushInterval: 20 * time.Millisecond, StatusInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// slotConfirmed reads the slot's confirmed_flush_lsn.
func (e *pgEnv) slotConfirmed() (uint64, error) { return slotConfirmed(e.db, e.slot) }

func slotConfirmed(conn *pgx.Conn, slot string) (uint64, error) {
	var s string
	err := conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&s)
	if err != nil {
		return 0, err
	}
	lsn, err := pglogrepl.ParseLSN(s)
	return uint64(lsn), err
}

// connect opens another connection to the test database.
func (e *pgEnv) connect() *pgx.Conn {
	e.t.Helper()
	conn, err := pgx.Connect(context.Background(), e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// lake is a destination that outlives hosts: a data directory for the
// disk WAL and local segment store, and an in-memory sink.
type lake struct {
	dir string
	mem *sinks.Memory
}

func newLake(t testing.TB) *lake {
	m := sinks.NewMemory()
	t.Cleanup(m.Release)
	return &lake{dir: t.TempDir(), mem: m}
}

// start builds and starts a host over the lake's directory; it is
// killed at cleanup if still running.
func (l *lake) start(t testing.TB) *storage.Host {
	t.Helper()
	loop := storage.NewLoop()
	disk, err := storage.NewOSDisk(loop, l.dir, storage.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DeriveConfig("wal", "pgcdc-test", 1<<20, 2, 100*time.Millisecond)
	cfg.Disk = engine.DefaultDiskWAL()
	cfg.FenceWait = 0
	set := sinks.Set{testSink: l.mem.Sink(loop.Ports(nil, nil).Timers)}
	h, err := storage.NewHost(cfg, loop, storage.HostPorts{
		Store: diskstore.New(disk, loop.Clock(), storage.NewRand(), "segments"), Disk: disk, Sinks: set,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("host start: %v", err)
	}
	return h
}

// ackedRow is one CDC row of an acked unit.
type ackedRow struct {
	ns       string
	identity string
	order    uint64
	kind     segment.MutationKind
}

// recorder wraps a host's Ingest and records every acked unit's rows
// and offsets, with when each unit was handed over.
type recorder struct {
	mu    sync.Mutex
	rows  []ackedRow
	units []ackedUnit
	// gate, if set, runs before each unit is handed to the host.
	gate func(u engine.Unit)
}

type ackedUnit struct {
	submitted time.Time // when ingest was called
	offsets   segment.Offsets
	ns        string
	rows      int
}

func (r *recorder) wrap(ingest IngestFunc) IngestFunc {
	return func(ctx context.Context, u engine.Unit) error {
		submitted := time.Now()
		if r.gate != nil {
			r.gate(u)
		}
		err := ingest(ctx, u)
		if err != nil {
			return err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range u.Sidecar.Rows {
			r.rows = append(r.rows, ackedRow{u.Key.Namespace, string(c.Identity), c.Order, c.Kind})
		}
		r.units = append(r.units, ackedUnit{submitted, append(segment.Offsets(nil), u.Offsets...), u.Key.Namespace, len(u.Sidecar.Rows)})
		return nil
	}
}

func (r *recorder) ackedRows() []ackedRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ackedRow(nil), r.rows...)
}

func (r *recorder) ackedUnits() []ackedUnit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ackedUnit(nil), r.units...)
}

// running is a source running in the background.
type running struct {
	src    *Source
	cancel context.CancelFunc
	done   chan error
}

// run starts src.Run against ingest from offsets. A test that ends
// while it runs stops it first: its replication connection holds the
// slot, which cleanup drops.
func run(t testing.TB, src *Source, ingest IngestFunc, offsets segment.Offsets) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{src: src, cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- src.Run(ctx, ingest, offsets)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// startOn builds a source for cfg reading h's offsets, and runs it
// against ingest (h.Ingest if nil) from h's offsets now.
func startOn(t testing.TB, cfg Config, h *storage.Host, ingest IngestFunc) *running {
	t.Helper()
	cfg.HostOffsets = h.Offsets
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	offsets, err := h.Offsets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ingest == nil {
		ingest = h.Ingest
	}
	return run(t, src, ingest, offsets)
}

// stop cancels the run and returns Run's answer.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20 s of its context ending")
		return nil
	}
}

// await is waitFor that fails at once, with Run's error, if Run ends.
func (r *running) await(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, d, what, func() bool {
		select {
		case err := <-r.done:
			t.Fatalf("Run ended while waiting for %s: %v", what, err)
		default:
		}
		return cond()
	})
}

// waitForSlot waits until the env's slot exists.
func (e *pgEnv) waitForSlot(t testing.TB) {
	t.Helper()
	conn := e.connect()
	waitFor(t, 15*time.Second, "the slot", func() bool {
		_, err := slotConfirmed(conn, e.slot)
		return err == nil
	})
}

// waitFor polls cond every 20 ms until it holds, failing after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quietLogger collects a source's log for a failing test.
func quietLogger(t testing.TB) *slog.Logger {
	buf := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("source log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
