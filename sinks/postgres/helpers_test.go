package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/internal/pgurl"
)

// testTimeout bounds every call a test makes to the server.
const testTimeout = 30 * time.Second

// server is a test's own database: the sink's DB on it and a plain
// connection to look at what the sink wrote.
type server struct {
	url  string
	db   *PGX
	conn *pgx.Conn
}

// newServer creates a database for t (skipping t when no server answers,
// failing it under CI=true) and opens the sink's DB on it.
func newServer(t testing.TB, maxConns int32) *server {
	t.Helper()
	url := pgtest.Database(t)
	return openServer(t, url, url, maxConns)
}

// openServer opens the sink's DB at dbURL (a proxy, say) and a checking
// connection at checkURL.
func openServer(t testing.TB, dbURL, checkURL string, maxConns int32) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	db, err := OpenPGX(ctx, dbURL, PGXOptions{MaxConns: maxConns})
	if err != nil {
		t.Fatalf("OpenPGX: %v", err)
	}
	t.Cleanup(db.Close)
	conn, err := pgx.Connect(ctx, checkURL)
	if err != nil {
		t.Fatalf("connect %s: %v", pgurl.Redact(checkURL), err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatalf("SET TimeZone: %v", err)
	}
	return &server{url: checkURL, db: db, conn: conn}
}

// apply plans job and applies it to the server's DB.
func (s *server) apply(t testing.TB, job *engine.Job) error {
	t.Helper()
	tx, err := Plan(job)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err = s.db.Apply(ctx, tx)
	return err
}

// mustApply applies job and fails t on an error.
func (s *server) mustApply(t testing.TB, job *engine.Job) {
	t.Helper()
	if err := s.apply(t, job); err != nil {
		t.Fatalf("apply job %s: %v", job.ID, err)
	}
}

// texts runs a query and returns each row's columns as text ("NULL"
// for NULL).
func (s *server) texts(t testing.TB, sql string, args ...any) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = "NULL"
			if v != nil {
				row[i] = fmt.Sprint(v)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// count returns a query's single integer.
func (s *server) count(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var n int64
	if err := s.conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// appliedRows is how many applied-jobs rows name jobID (0 or 1).
func (s *server) appliedRows(t testing.TB, jobID string) int64 {
	t.Helper()
	return s.count(t, "SELECT count(*) FROM skipprd_applied_jobs WHERE compaction_id = $1", jobID)
}

// columnTypes returns table's columns as name → format_type.
func (s *server) columnTypes(t testing.TB, table string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range s.texts(t, `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`, quote(table)) {
		out[r[0]] = r[1]
	}
	return out
}

// plainJob is a job of one slice holding batches.
func plainJob(id, table string, batches ...arrow.RecordBatch) *engine.Job {
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	return &engine.Job{ID: id, Content: contentOf(id), Origin: testOrigin, SinkRef: "pg", Namespace: table, Slices: []*segment.Slice{{
		Entry: segment.IndexEntry{Rows: rows}, Schema: batches[0].Schema(), Batches: batches}}}
}

// testOrigin is the log the test jobs come from.
var testOrigin = segment.Origin{WAL: segment.WALID{0x7e, 0x57}, Pipeline: "test"}

// contentOf is a test job's content: 32 hex digits, a function of its id.
func contentOf(id string) string {
	sum := sha256.Sum256([]byte("content of " + id))
	return hex.EncodeToString(sum[:16])
}

// mustPlan plans job and fails t on an error.
func mustPlan(t testing.TB, job *engine.Job) *Tx {
	t.Helper()
	tx, err := Plan(job)
	if err != nil {
		t.Fatalf("Plan job %s: %v", job.ID, err)
	}
	return tx
}

// cdcJob is a job of one CDC slice: changes[i] describes row i.
func cdcJob(id, table string, changes []segment.CDCRow, batches ...arrow.RecordBatch) *engine.Job {
	job := plainJob(id, table, batches...)
	job.Slices[0].Sidecar = &segment.Sidecar{Rows: changes}
	return job
}

// int64Batch is a batch of int64 columns named names, row r holding
// rows[r] (nil: null).
func int64Batch(t testing.TB, names []string, rows [][]*int64) arrow.RecordBatch {
	t.Helper()
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		fields[i] = arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, row := range rows {
		for c, v := range row {
			if v == nil {
				b.Field(c).AppendNull()
			} else {
				b.Field(c).(*array.Int64Builder).Append(*v)
			}
		}
	}
	return b.NewRecordBatch()
}

func i64(v int64) *int64 { return &v }

// wantCannotApply fails t unless err wraps engine.ErrCannotApply and its
// message holds every one of words.
func wantCannotApply(t testing.TB, err error, words ...string) {
	t.Helper()
	if !errors.Is(err, engine.ErrCannotApply) {
		t.Fatalf("err = %v, want one wrapping engine.ErrCannotApply", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %q, want it to name %q", err, w)
		}
	}
}

// ctxT is a context bounded by testTimeout and ended with t.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}
