package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/storage"
)

// otherLogs is job's id with another log's content and origin: what two
// pipelines made before compaction ids carried the log's identity.
func otherLogs(job *engine.Job) *engine.Job {
	o := *job
	o.Content = "0badc0de0badc0de0badc0de0badc0de"
	o.Origin = segment.Origin{WAL: segment.WALID{0x0b, 0xad}, Pipeline: "other"}
	return &o
}

// wantCollision fails t unless err is a refusal for an id collision
// whose message names every one of words.
func wantCollision(t testing.TB, err error, words ...string) {
	t.Helper()
	if !errors.Is(err, engine.ErrCannotApply) || !errors.Is(err, engine.ErrIDCollision) || errors.Is(err, ErrAmbiguous) {
		t.Fatalf("err = %v, want one wrapping ErrCannotApply and ErrIDCollision (and not ErrAmbiguous)", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %q, want it to name %q", err, w)
		}
	}
}

// appliedRow is the applied-jobs row of id as text: table, rows,
// content, pipeline, wal_id.
func (s *server) appliedRow(t testing.TB, id string) string {
	t.Helper()
	got := s.texts(t, "SELECT table_name, rows::text, coalesce(content, 'NULL'), coalesce(pipeline, 'NULL'), coalesce(wal_id, 'NULL') FROM skipprd_applied_jobs WHERE compaction_id = $1", id)
	if len(got) != 1 {
		t.Fatalf("job %s: %d applied-jobs rows", id, len(got))
	}
	return strings.Join(got[0], " ")
}

// On the server: the applied-jobs row records the job's content and
// origin; a replay finds it (FoundApplied) and writes nothing; another
// job under the id — by Apply or by the lookup that settles an ambiguous
// COMMIT — is a collision, and the row and the table are left as they
// were.
func TestPGXTellsAnotherJobUnderTheID(t *testing.T) {
	s := newServer(t, 2)
	job := plainJob("j-tell", "tell", bigBatch(t, 3))
	tx := mustPlan(t, job)
	if found, err := s.db.Apply(ctxT(t), tx); err != nil || found != Committed {
		t.Fatalf("Apply = %s, %v; want committed", found, err)
	}
	row := "tell 3 " + job.Content + " test 7e570000000000000000000000000000"
	if got := s.appliedRow(t, job.ID); got != row {
		t.Fatalf("applied-jobs row %q, want %q", got, row)
	}
	if found, err := s.db.Apply(ctxT(t), tx); err != nil || found != FoundApplied {
		t.Fatalf("replay: %s, %v; want found applied", found, err)
	}
	if found, err := s.db.Applied(ctxT(t), tx); err != nil || found != FoundApplied {
		t.Fatalf("lookup: %s, %v; want found applied", found, err)
	}

	other := mustPlan(t, otherLogs(job))
	_, err := s.db.Apply(ctxT(t), other)
	wantCollision(t, err, "job j-tell", "public.skipprd_applied_jobs", "content "+job.Content, "this job's is 0badc0de",
		"pipeline test, WAL 7e57", "pipeline other, WAL 0bad", `table "tell", 3 rows`)
	_, err = s.db.Applied(ctxT(t), other)
	wantCollision(t, err, "job j-tell", "content "+job.Content, "this job's is 0badc0de")
	if got := s.appliedRow(t, job.ID); got != row {
		t.Fatalf("after the collisions the applied-jobs row is %q, want %q", got, row)
	}
	if n := s.count(t, "SELECT count(*) FROM tell"); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}

	// A legacy job (no origin) records NULL pipeline and WAL id.
	legacy := plainJob("j-legacy-origin", "tell", bigBatch(t, 2))
	legacy.Origin = segment.Origin{}
	s.mustApply(t, legacy)
	if got, want := s.appliedRow(t, legacy.ID), "tell 2 "+legacy.Content+" NULL NULL"; got != want {
		t.Fatalf("applied-jobs row %q, want %q", got, want)
	}
}

// An applied-jobs table an older build made (no content, pipeline,
// wal_id) gets the columns at start-up; its old rows still count: one of
// the job's table and row count is trusted as applied, one of other rows
// is a collision; new jobs record their content.
func TestPGXUpgradesAppliedJobs(t *testing.T) {
	url := pgtest.Database(t)
	old, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Close(context.Background()) }()
	if _, err := old.Exec(ctxT(t), `CREATE TABLE skipprd_applied_jobs (
			compaction_id text PRIMARY KEY,
			table_name text NOT NULL,
			rows bigint NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO skipprd_applied_jobs (compaction_id, table_name, rows) VALUES ('j-same', 'up', 2), ('j-other', 'up', 5)`); err != nil {
		t.Fatal(err)
	}
	s := openServer(t, url, url, 2)
	cols := s.texts(t, `SELECT string_agg(attname::text || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) FROM pg_attribute
		WHERE attrelid = 'skipprd_applied_jobs'::regclass AND attnum > 0 AND NOT attisdropped`)
	if want := "compaction_id text, table_name text, rows bigint, applied_at timestamp with time zone, content text, pipeline text, wal_id text"; cols[0][0] != want {
		t.Fatalf("columns after the upgrade: %s, want %s", cols[0][0], want)
	}
	// Opening again finds every column there.
	again, err := OpenPGX(ctxT(t), url, PGXOptions{MaxConns: 1})
	if err != nil {
		t.Fatalf("OpenPGX on an upgraded table: %v", err)
	}
	again.Close()

	same := mustPlan(t, plainJob("j-same", "up", bigBatch(t, 2)))
	if found, err := s.db.Apply(ctxT(t), same); err != nil || found != FoundLegacy {
		t.Fatalf("a job of the legacy row's table and rows: %s, %v; want trusted", found, err)
	}
	if found, err := s.db.Applied(ctxT(t), same); err != nil || found != FoundLegacy {
		t.Fatalf("lookup of a legacy row: %s, %v; want trusted", found, err)
	}
	_, err = s.db.Apply(ctxT(t), mustPlan(t, plainJob("j-other", "up", bigBatch(t, 3))))
	wantCollision(t, err, "job j-other", "in a row without a content", `for table "up", 5 rows`, `is for table "up", 3 rows`)
	_, err = s.db.Apply(ctxT(t), mustPlan(t, plainJob("j-same", "elsewhere", bigBatch(t, 2))))
	wantCollision(t, err, "job j-same", `for table "up", 2 rows`, `is for table "elsewhere", 2 rows`)
	if n := s.count(t, "SELECT count(*) FROM pg_class WHERE relname IN ('up', 'elsewhere')"); n != 0 {
		t.Fatalf("jobs found applied or refused created %d tables", n)
	}
	for id, want := range map[string]string{"j-same": "up 2 NULL NULL NULL", "j-other": "up 5 NULL NULL NULL"} {
		if got := s.appliedRow(t, id); got != want {
			t.Fatalf("old row %s is %q, want %q", id, got, want)
		}
	}

	fresh := plainJob("j-new", "up", bigBatch(t, 4))
	s.mustApply(t, fresh)
	if got, want := s.appliedRow(t, "j-new"), "up 4 "+fresh.Content+" test 7e570000000000000000000000000000"; got != want {
		t.Fatalf("new row %q, want %q", got, want)
	}
	// An older build still running beside the upgraded table inserts as
	// it did; its row reads as legacy.
	if _, err := old.Exec(ctxT(t), "INSERT INTO skipprd_applied_jobs (compaction_id, table_name, rows) VALUES ('j-old-build', 'up', 1)"); err != nil {
		t.Fatalf("an old build's insert: %v", err)
	}
	if found, err := s.db.Apply(ctxT(t), mustPlan(t, plainJob("j-old-build", "up", bigBatch(t, 1)))); err != nil || found != FoundLegacy {
		t.Fatalf("a job an old build recorded: %s, %v; want trusted", found, err)
	}
}

// The Model, driven by the Sink, tells the same way, and the Sink counts
// what it found: replays, trusted legacy rows, collisions. The lookup
// that settles an ambiguous commit compares too: an id found with
// another job's content is a collision, not "landed".
func TestModelTellsAnotherJobUnderTheID(t *testing.T) {
	loop := runLoop(t)
	model := NewModel()
	sink := NewSink(model, storage.NewWorkers(loop, 1, testTimeout))
	apply := func(job *engine.Job) error {
		err, _ := storage.Call(loop, func(done func(error)) { sink.Apply(job, done) })
		return err
	}
	job := plainJob("j-tell", "t", int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}, {i64(2)}}))
	for range 2 {
		if err := apply(job); err != nil {
			t.Fatal(err)
		}
	}
	wantCollision(t, apply(otherLogs(job)), "job j-tell", "the model's skipprd_applied_jobs", "content "+job.Content, "this job's is 0badc0de")
	if tb := model.Table("t"); len(tb.Rows) != 2 || len(model.AppliedJobs()) != 1 {
		t.Fatalf("after a collision the model holds %d rows, %d jobs", len(tb.Rows), len(model.AppliedJobs()))
	}

	// Rows of an older build: no content.
	model.byJob["j-legacy"] = AppliedRow{Table: "t", Rows: 2}
	if err := apply(plainJob("j-legacy", "t", int64Batch(t, []string{"a"}, [][]*int64{{i64(3)}, {i64(4)}}))); err != nil {
		t.Fatalf("a job of a legacy row's table and rows: %v", err)
	}
	wantCollision(t, apply(plainJob("j-legacy", "t", int64Batch(t, []string{"a"}, [][]*int64{{i64(3)}}))), "in a row without a content")

	// Another log's job commits under the id while this one's COMMIT goes
	// unanswered: the lookup finds it and refuses.
	model.Decide = func(tx *Tx) Outcome {
		model.byJob[tx.JobID] = rowOf(mustPlan(t, otherLogs(plainJob(tx.JobID, tx.Table, tx.Batches...))))
		return FailAmbiguous
	}
	wantCollision(t, apply(plainJob("j-raced", "t", int64Batch(t, []string{"a"}, [][]*int64{{i64(5)}}))), "job j-raced", "0badc0de", "settling")
	if st := sink.Stats(); st != (Stats{Applied: 3, Replayed: 1, LegacyTrusted: 1, Refused: 3, Collisions: 3}) {
		t.Fatalf("stats %+v", st)
	}
}
