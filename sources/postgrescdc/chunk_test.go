package postgrescdc

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"
)

const testOID = 16384

// testStreamer is a streamer of one table public.t (id int4 key, v text)
// with no connection: the tests drive its message handlers directly.
func testStreamer(t *testing.T, chunkRows int, chunkBytes int64) (*streamer, *table) {
	t.Helper()
	cfg := Config{URL: "postgres://x@h/db", Publication: "p", Slot: "s", SinkRef: "lake", ChunkRows: chunkRows, ChunkBytes: chunkBytes}.withDefaults()
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	src := &Source{cfg: cfg, resynced: map[uint32]bool{}}
	tb := src.newTable(catalogTable{name: tableName{"public", "t"}, oid: testOID, replIdent: 'd',
		columns: []column{{"id", oidInt4}, {"v", 25}}, keyNames: []string{"id"}})
	st := &streamer{session: &session{src: src, tables: []*table{tb}, byOID: map[uint32]*table{testOID: tb}}, rels: map[uint32]relation{}}
	if err := st.onRelation(testRelation("id", "v")); err != nil {
		t.Fatal(err)
	}
	return st, tb
}

func testRelation(cols ...string) msgRelation {
	m := msgRelation{oid: testOID, name: tableName{"public", "t"}, replIdent: 'd'}
	for i, c := range cols {
		m.columns = append(m.columns, relColumn{key: i == 0, name: c, typOID: map[bool]uint32{true: oidInt4, false: 25}[i == 0]})
	}
	return m
}

// txn is a transaction to feed: its commit LSN and its inserts' ids;
// change i is at WAL position commit - 1000 + i.
type txn struct {
	commit pglogrepl.LSN
	ids    []int
}

func feed(st *streamer, txs ...txn) error {
	for _, tx := range txs {
		if err := st.onBegin(msgBegin{commit: tx.commit}); err != nil {
			return err
		}
		for i, id := range tx.ids {
			m := msgChange{op: 'I', oid: testOID, new: tv(fmt.Sprint(id), "value")}
			if err := st.onChange(m, tx.commit-1000+pglogrepl.LSN(i)); err != nil {
				return err
			}
		}
		if err := st.onCommit(msgCommit{commit: tx.commit, end: tx.commit + 40}); err != nil {
			return err
		}
	}
	return nil
}

func ids(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// chunkSummary is what identifies a pending chunk: position and orders.
type chunkSummary struct {
	pos    Position
	orders string
}

func pending(tb *table) []chunkSummary {
	var out []chunkSummary
	for _, c := range tb.pending {
		var orders []uint64
		for _, r := range c.cdc {
			orders = append(orders, r.Order)
		}
		out = append(out, chunkSummary{Position(c.value), fmt.Sprint(orders)})
	}
	return out
}

// A transaction's changes to a table are cut into chunks of ChunkRows
// rows, numbered from 0 in each transaction; a replay that starts at any
// transaction, with the table acked up to some chunk, cuts the same
// chunks at the same positions and keeps exactly those above it.
func TestChunkCutReplays(t *testing.T) {
	a := txn{commit: 0x10000, ids: ids(1, 130)}
	b := txn{commit: 0x20000, ids: ids(200, 120)}
	first, tb := testStreamer(t, 50, DefaultChunkBytes)
	if err := feed(first, a, b); err != nil {
		t.Fatal(err)
	}
	all := pending(tb)
	wantPos := []Position{0x10000 << 16, 0x10000<<16 | 1, 0x10000<<16 | 2, 0x20000 << 16, 0x20000<<16 | 1, 0x20000<<16 | 2}
	var gotPos []Position
	for _, c := range all {
		gotPos = append(gotPos, c.pos)
	}
	if !slices.Equal(gotPos, wantPos) || first.tx.lastEnd != b.commit+40 {
		t.Fatalf("chunks at %v, want %v; last end %s", gotPos, wantPos, first.tx.lastEnd)
	}
	for k, ack := range all {
		starts := [][]txn{{a, b}} // the slot confirmed before a
		if ack.pos.Commit() == b.commit {
			starts = append(starts, []txn{b}) // or past it
		}
		for _, txs := range starts {
			replay, tb2 := testStreamer(t, 50, DefaultChunkBytes)
			tb2.acked = uint64(ack.pos)
			if err := feed(replay, txs...); err != nil {
				t.Fatal(err)
			}
			if got := pending(tb2); !slices.Equal(got, all[k+1:]) {
				t.Fatalf("acked up to %v, replay of %d transactions keeps %v, want %v", ack.pos, len(txs), got, all[k+1:])
			}
			if replay.src.stats.changesSkipped.Load() == 0 {
				t.Fatalf("acked up to %v: nothing counted as skipped", ack.pos)
			}
		}
	}
}

// A chunk also ends once its rows hold ChunkBytes, and before a row of
// another shape.
func TestChunkCutByBytesAndShape(t *testing.T) {
	st, tb := testStreamer(t, 50, 10) // a row is 9 bytes: "1", "value", identity 00 01 '1'
	if err := feed(st, txn{commit: 0x10000, ids: ids(1, 5)}); err != nil {
		t.Fatal(err)
	}
	var rows []int
	for _, c := range tb.pending {
		rows = append(rows, c.rows())
	}
	if !slices.Equal(rows, []int{2, 2, 1}) {
		t.Fatalf("5 rows of 9 bytes, chunks of 10 bytes: chunks of %v rows, want [2 2 1]", rows)
	}

	st, tb = testStreamer(t, 50, DefaultChunkBytes)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.onBegin(msgBegin{commit: 0x10000}))
	must(st.onChange(msgChange{op: 'I', oid: testOID, new: tv("1", "a")}, 0x100))
	must(st.onRelation(testRelation("id", "v", "w")))
	must(st.onChange(msgChange{op: 'I', oid: testOID, new: tv("2", "b", "c")}, 0x101))
	must(st.onRelation(testRelation("id", "v", "w"))) // the same columns again: no cut
	must(st.onChange(msgChange{op: 'I', oid: testOID, new: tv("3", "b", "c")}, 0x102))
	must(st.onCommit(msgCommit{commit: 0x10000, end: 0x10040}))
	if len(tb.pending) != 2 || tb.pending[0].rows() != 1 || tb.pending[1].rows() != 2 || tb.pending[0].shape.equal(tb.pending[1].shape) {
		t.Fatalf("chunks %v: want one of the old shape and one of two rows of the new", pending(tb))
	}
}

// The stream's order must hold, or the source fails closed.
func TestStreamOrderChecks(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(st *streamer) error
	}{
		{"commit going back", func(st *streamer) error {
			return feed(st, txn{commit: 0x20000, ids: ids(1, 1)}, txn{commit: 0x10000, ids: ids(2, 1)})
		}},
		{"change going back", func(st *streamer) error {
			_ = st.onBegin(msgBegin{commit: 0x10000})
			_ = st.onChange(msgChange{op: 'I', oid: testOID, new: tv("1", "a")}, 0x200)
			return st.onChange(msgChange{op: 'I', oid: testOID, new: tv("2", "a")}, 0x1FF)
		}},
		{"change after its commit", func(st *streamer) error {
			_ = st.onBegin(msgBegin{commit: 0x10000})
			return st.onChange(msgChange{op: 'I', oid: testOID, new: tv("1", "a")}, 0x10000)
		}},
		{"change outside a transaction", func(st *streamer) error {
			return st.onChange(msgChange{op: 'I', oid: testOID, new: tv("1", "a")}, 0x100)
		}},
		{"commit of another transaction", func(st *streamer) error {
			_ = st.onBegin(msgBegin{commit: 0x10000})
			return st.onCommit(msgCommit{commit: 0x10001, end: 0x10040})
		}},
		{"commit LSN too large for a position", func(st *streamer) error {
			return st.onBegin(msgBegin{commit: CommitLSNLimit})
		}},
		{"change of an unknown relation", func(st *streamer) error {
			_ = st.onBegin(msgBegin{commit: 0x10000})
			return st.onChange(msgChange{op: 'I', oid: 1, new: tv("1")}, 0x100)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := testStreamer(t, 50, DefaultChunkBytes)
			if err := c.run(st); !errors.Is(err, ErrInvariant) {
				t.Fatalf("error %v, want ErrInvariant", err)
			}
		})
	}
}

// What rows a change becomes.
func TestChangeRows(t *testing.T) {
	st, tb := testStreamer(t, 50, DefaultChunkBytes)
	rel := st.rels[testOID]
	id := func(k string) string { return string(mustIdentity(t, k)) }
	for _, c := range []struct {
		name  string
		m     msgChange
		want  []string // kind identity values
		error error
	}{
		{"insert", msgChange{op: 'I', new: tv("1", "a")}, []string{"insert " + id("1") + " [1 a]"}, nil},
		{"update", msgChange{op: 'U', new: tv("1", "b")}, []string{"update " + id("1") + " [1 b]"}, nil},
		{"delete keeps the key only", msgChange{op: 'D', oldKind: 'O', old: tv("1", "b")}, []string{"delete " + id("1") + " [1 <nil>]"}, nil},
		{"key change", msgChange{op: 'U', oldKind: 'K', old: tv("1", "\x00"), new: tv("2", "b")},
			[]string{"delete " + id("1") + " [1 <nil>]", "insert " + id("2") + " [2 b]"}, nil},
		{"old row, same key", msgChange{op: 'U', oldKind: 'O', old: tv("1", "a"), new: tv("1", "\x01")}, []string{"update " + id("1") + " [1 a]"}, nil},
		{"unchanged TOAST without the old row", msgChange{op: 'U', new: tv("1", "\x01")}, nil, ErrStream},
		{"unchanged TOAST with only the old key", msgChange{op: 'U', oldKind: 'K', old: tv("1", "\x00"), new: tv("1", "\x01")}, nil, ErrStream},
		{"NULL key", msgChange{op: 'I', new: tv("\x00", "a")}, nil, ErrStream},
		{"wrong width", msgChange{op: 'I', new: tv("1")}, nil, ErrInvariant},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows, err := changeRows(relation{table: tb, shape: rel.shape}, c.m, 7)
			if c.error != nil {
				if !errors.Is(err, c.error) {
					t.Fatalf("error %v, want %v", err, c.error)
				}
				return
			}
			var got []string
			for _, r := range rows {
				vals := make([]any, len(r.values))
				for i, v := range r.values {
					if v != nil {
						vals[i] = string(v)
					}
				}
				if r.cdc.Order != 7 {
					t.Fatalf("order %d", r.cdc.Order)
				}
				got = append(got, fmt.Sprintf("%s %s %v", r.cdc.Kind, r.cdc.Identity, vals))
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("rows %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// A unit holds whole chunks of one shape within the unit limits, and
// advances the table's key to its last chunk's position.
func TestCutUnits(t *testing.T) {
	st, tb := testStreamer(t, 50, DefaultChunkBytes)
	st.src.cfg.UnitRows = 120
	if err := feed(st, txn{commit: 0x10000, ids: ids(1, 130)}, txn{commit: 0x20000, ids: ids(200, 30)}); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, g := range st.src.cutGroups(tb.pending) {
		u := st.src.unitOf(tb, tb.streamKey, g)
		shape = append(shape, fmt.Sprintf("%d@%v", len(u.Sidecar.Rows), Position(u.Offsets[0].Value)))
		if len(u.Offsets) != 1 || u.Offsets[0].Key != tb.streamKey || u.Key.Namespace != "t" || u.Key.SinkRef != "lake" {
			t.Fatalf("unit %+v", u)
		}
	}
	want := []string{
		fmt.Sprintf("100@%v", Position(0x10000<<16|1)),
		fmt.Sprintf("60@%v", Position(0x20000<<16)),
	}
	if !slices.Equal(shape, want) {
		t.Fatalf("units %v, want %v", shape, want)
	}
}
