package postgrescdc

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/skipprd/skipprd/engine/segment"
)

// runErr waits for a run to end on its own and returns its error.
func runErr(t *testing.T, r *running) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not fail within 15 s")
		return nil
	}
}

// wantErr fails unless err matches sentinel and says every one of words.
func wantErr(t *testing.T, err, sentinel error, words ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

// toastEnv is a table whose body column is stored out of line, with a
// row whose body is; a source runs on it once streaming has started.
func toastEnv(t *testing.T, identity string) (*pgEnv, *lake, *running) {
	e := newPGEnv(t)
	e.exec(`CREATE TABLE doc (id int PRIMARY KEY, body text, n int)`,
		`ALTER TABLE doc ALTER COLUMN body SET STORAGE EXTERNAL`,
		`ALTER TABLE doc REPLICA IDENTITY `+identity,
		`INSERT INTO doc VALUES (1, repeat('x', 9000), 0), (2, 'short', 0)`)
	l := newLake(t)
	cfg := e.config("public.doc")
	cfg.Logger = quietLogger(t)
	r, _ := startSource(t, cfg, l.start(t))
	r.await(t, 10*time.Second, "the stream", func() bool { return r.src.Stats().ConfirmedLSN > 0 })
	return e, l, r
}

// An update that leaves a TOASTed value unchanged, on a table whose
// updates carry no old row, cannot be written whole: Run fails closed
// naming the table and column and the setting that fixes it, having
// acked and confirmed nothing of that transaction.
func TestUnchangedToastWithoutOldRowFailsClosed(t *testing.T) {
	t.Parallel()
	e, _, r := toastEnv(t, "DEFAULT")
	e.exec(`UPDATE doc SET n = 1 WHERE id = 1`)
	err := runErr(t, r)
	wantErr(t, err, ErrStream, "public.doc", `"body"`, "REPLICA IDENTITY FULL")
	commit := committedAt(t, err)
	confirmed, err := e.slotConfirmed()
	if err != nil || confirmed > commit || r.src.Stats().Changes != 0 {
		t.Fatalf("slot at %x (%v), %d changes acked: nothing of the failed transaction (committed at %x) may be",
			confirmed, err, r.src.Stats().Changes, commit)
	}
}

// committedAt reads "committed at X/Y" from an error of the stream.
func committedAt(t *testing.T, err error) uint64 {
	t.Helper()
	m := regexp.MustCompile(`committed at ([0-9A-F]+/[0-9A-F]+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q does not name the transaction's commit", err)
	}
	lsn, perr := pglogrepl.ParseLSN(m[1])
	if perr != nil {
		t.Fatal(perr)
	}
	return uint64(lsn)
}

// With REPLICA IDENTITY FULL the unchanged TOASTed value is taken from
// the old row, and the row's identity is still its primary key (FULL
// marks every column as key in the stream).
func TestUnchangedToastFilledFromOldRow(t *testing.T) {
	t.Parallel()
	e, l, r := toastEnv(t, "FULL")
	w := &workload{t: t, conn: e.db}
	w.tx(ch(`UPDATE doc SET n = 1 WHERE id = 1`), ch(`UPDATE doc SET n = 2, body = 'new' WHERE id = 2`))
	w.check()
	waitFor(t, 10*time.Second, "the changes acked", func() bool { return int64(r.src.Stats().Changes) == w.changes })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkLake(t, e, l, []string{"public.doc"}, w.changes)
	if got, _ := l.state(t, "doc"); !strings.Contains(got[string(mustIdentity(t, "1"))], strings.Repeat("x", 9000)) {
		t.Fatal("the updated row lost its TOASTed body")
	}
}

func mustIdentity(t *testing.T, keys ...string) []byte {
	values := make([][]byte, len(keys))
	for i, k := range keys {
		values[i] = []byte(k)
	}
	id, err := appendIdentity(nil, tableName{"public", "t"}, keys, values)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A TRUNCATE of a captured table fails closed: it names no rows.
func TestTruncateFailsClosed(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`, `INSERT INTO t VALUES (1), (2)`)
	l := newLake(t)
	cfg := e.config("public.t")
	cfg.Logger = quietLogger(t)
	r, _ := startSource(t, cfg, l.start(t))
	r.await(t, 10*time.Second, "the stream", func() bool { return r.src.Stats().ConfirmedLSN > 0 })
	e.exec(`INSERT INTO t VALUES (3)`, `TRUNCATE t`)
	err := runErr(t, r)
	wantErr(t, err, ErrStream, "public.t", "truncated")
	confirmed, cerr := e.slotConfirmed()
	if n := r.src.Stats().Changes; n != 1 || cerr != nil || confirmed > committedAt(t, err) {
		t.Fatalf("%d changes acked, slot at %x (%v): the insert before the truncate must be acked and confirmed, the truncate not", n, confirmed, cerr)
	}
}

// What setup refuses, each with an error naming the remedy: a table
// without a key, a table missing from an existing publication, a slot
// dropped after the source confirmed with it (a new one would miss the
// changes since), and a chunk cut other than the one the offsets were
// made with. None leaves a slot behind.
func TestSetupRefuses(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE nokey (v int)`, `CREATE TABLE ok (id int PRIMARY KEY)`, `CREATE TABLE other (id int PRIMARY KEY)`)
	l := newLake(t)
	h := l.start(t)
	runWith := func(cfg Config, offsets segment.Offsets) error {
		cfg.Logger = quietLogger(t)
		src, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return runErr(t, run(t, src, h.Ingest, offsets))
	}

	cfg := e.config("public.nokey")
	cfg.Publication = "pub_nokey_" + e.slot[len(e.slot)-6:]
	wantErr(t, runWith(cfg, nil), ErrSetup, "public.nokey", "no primary key")

	e.exec(`CREATE PUBLICATION ` + e.pub + ` FOR TABLE other`)
	wantErr(t, runWith(e.config("public.ok"), nil), ErrSetup, "public.ok", "ALTER PUBLICATION "+e.pub+" ADD TABLE public.ok")

	e.exec(`ALTER PUBLICATION ` + e.pub + ` ADD TABLE ok`)
	gone := segment.Offsets{{Key: streamKey(e.slot, tableName{"public", "ok"}), Value: 1 << 20}}
	wantErr(t, runWith(e.config("public.ok"), gone), ErrSetup, "slot "+e.slot+" does not exist")

	chunking := segment.Offsets{{Key: chunkingKey(e.slot), Value: chunkingValue(100, DefaultChunkBytes)}}
	wantErr(t, runWith(e.config("public.ok"), chunking), ErrSetup, "chunks of 100 rows")

	if _, err := slotConfirmed(e.db, e.slot); err == nil {
		t.Fatal("a refused setup created the slot")
	}
}
