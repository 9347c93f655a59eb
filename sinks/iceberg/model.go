package iceberg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	icego "github.com/apache/iceberg-go"
)

// Model is an in-memory Catalog: tables, snapshots, properties, schema
// ids and pins as the SQL catalog keeps them, every request atomic. The
// simulator drives the real Sink against it; Decide injects what goes
// wrong with a request, and the model keeps, beside each table's
// retained snapshots, the log of every snapshot ever committed, for the
// oracles. It is safe for concurrent use and starts no goroutine.
type Model struct {
	// Decide returns the fate of one request (nil: always OK). It runs
	// under the model's lock.
	Decide func(op Op, id Ident) Outcome
	// Down, when set and true, fails every request before anything else
	// happens: an outage of the catalog's server.
	Down func() bool
	// NowMs is the wall clock snapshots are stamped with (nil: 0).
	NowMs func() int64

	mu        sync.Mutex
	warehouse string
	tables    map[Ident]*ModelTable
	snapshots int64 // the last snapshot id handed out
	foreign   int   // foreign commits made
}

// Op names a Catalog request.
type Op uint8

const (
	OpLoad Op = iota
	OpCreate
	OpEvolve
	OpAppend
	OpExpire
	OpRewrite
)

var opNames = [...]string{"load", "create", "evolve", "append", "expire", "rewrite"}

func (o Op) String() string { return opNames[o] }

// Outcome is what happens to one request in the model.
type Outcome uint8

const (
	OK Outcome = iota
	// Fail: nothing happens; a definite error.
	Fail
	// FailAmbiguous: nothing happens; the error says the outcome is
	// unknown (a timeout before the request reached the server).
	FailAmbiguous
	// Ambiguous: the request takes effect; the answer is lost.
	Ambiguous
	// Conflict: another writer (another pipeline) commits to the table
	// first — a snapshot, and for an Evolve a column of its own — so a
	// pinned request fails with ErrConflict.
	Conflict
)

// ModelTable is one table of the model.
type ModelTable struct {
	Location string
	Schema   *icego.Schema
	Spec     PartitionSpec
	Props    map[string]string
	// Snapshots are the retained ones, oldest first; Log every snapshot
	// ever committed, expired or not.
	Snapshots, Log []Snapshot
	// Files are the current snapshot's data files, in commit order, with
	// the snapshot that added each.
	Files []ModelFile
	// Rewritten holds, for each file a Rewrite added, the files it
	// replaced, in the order of their rows in it: what the oracle reads
	// a rewritten file's rows back to their jobs by.
	Rewritten map[string][]ModelFile
	Version   int // metadata version: one per commit
	// MetadataLog and Manifests follow the real catalog's rules:
	// previous metadata files kept (at most metadataLogMax), manifests
	// in the current list (merged past manifestsMergeMin).
	MetadataLog, Manifests int
}

// ModelFile is a data file in a table, and the snapshot that added it.
type ModelFile struct {
	DataFile
	Snapshot int64
}

// The real catalog's metadata limits, as the sqlcatalog package sets
// them on the tables it creates.
const (
	metadataLogMax    = 10
	manifestsMergeMin = 16
)

// NewModel returns an empty catalog whose tables live under warehouse.
func NewModel(warehouse string) *Model {
	return &Model{warehouse: warehouse, tables: map[Ident]*ModelTable{}}
}

var errDown = errors.New("iceberg model: catalog unavailable")

// begin decides one request: nil to go ahead, or the error it fails with
// before anything happens, and whether it lands though answered wrongly.
func (m *Model) begin(op Op, id Ident) (Outcome, error) {
	if m.Down != nil && m.Down() {
		return Fail, fmt.Errorf("%s %s: %w", op, id, errDown)
	}
	if m.Decide == nil {
		return OK, nil
	}
	o := m.Decide(op, id)
	switch o {
	case Fail:
		return o, fmt.Errorf("iceberg model: %s %s failed", op, id)
	case FailAmbiguous:
		return o, fmt.Errorf("iceberg model: %s %s: no answer (it did not land)", op, id)
	}
	return o, nil
}

// Load implements Catalog.
func (m *Model) Load(_ context.Context, id Ident) (*Table, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, err := m.begin(OpLoad, id); err != nil || o == Ambiguous {
		return nil, cmp.Or(err, fmt.Errorf("iceberg model: load %s: no answer", id))
	}
	mt, ok := m.tables[id]
	if !ok {
		return nil, fmt.Errorf("%s: %w", id, ErrNoTable)
	}
	return mt.view(id), nil
}

// view is what a Load returns: a copy the caller may keep.
func (mt *ModelTable) view(id Ident) *Table {
	t := &Table{Ident: id, Location: mt.Location, Schema: mt.Schema, Spec: mt.Spec,
		Snapshots: slices.Clone(mt.Snapshots), Props: maps.Clone(mt.Props),
		MetadataLocation: fmt.Sprintf("%s/metadata/%05d.metadata.json", mt.Location, mt.Version),
		Manifests:        mt.Manifests, MetadataLog: mt.MetadataLog}
	if n := len(mt.Log); n > 0 {
		t.Current = mt.Log[n-1].ID
	}
	return t
}

// Create implements Catalog.
func (m *Model) Create(_ context.Context, id Ident, schema *icego.Schema, spec PartitionSpec, props map[string]string) (*Table, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, err := m.begin(OpCreate, id)
	if err != nil {
		return nil, err
	}
	if _, ok := m.tables[id]; ok {
		return nil, fmt.Errorf("%s: %w", id, ErrTableExists)
	}
	if _, ok := schema.FindFieldByName(spec.SourceColumn); !ok {
		return nil, fmt.Errorf("iceberg model: create %s: no partition column %s in %v", id, spec.SourceColumn, schema)
	}
	mt := &ModelTable{Location: m.warehouse + "/" + id.Namespace + "/" + id.Name, Schema: schema, Spec: spec,
		Props: maps.Clone(props)}
	if mt.Props == nil {
		mt.Props = map[string]string{}
	}
	m.tables[id] = mt
	if o == Ambiguous {
		return nil, fmt.Errorf("iceberg model: create %s: no answer (it landed)", id)
	}
	return mt.view(id), nil
}

// Evolve implements Catalog.
func (m *Model) Evolve(_ context.Context, t *Table, ch Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, err := m.begin(OpEvolve, t.Ident)
	if err != nil {
		return err
	}
	mt, ok := m.tables[t.Ident]
	if !ok {
		return fmt.Errorf("%s: %w", t.Ident, ErrNoTable)
	}
	if o == Conflict {
		m.foreignColumn(mt)
	}
	if mt.Schema.ID != t.Schema.ID {
		return fmt.Errorf("iceberg model: evolve %s: schema %d, built on %d: %w", t.Ident, mt.Schema.ID, t.Schema.ID, ErrConflict)
	}
	s, err := evolved(mt.Schema, ch)
	if err != nil {
		return fmt.Errorf("iceberg model: evolve %s: %w", t.Ident, err)
	}
	mt.Schema = s
	mt.commitMetadata()
	if o == Ambiguous {
		return fmt.Errorf("iceberg model: evolve %s: no answer (it landed)", t.Ident)
	}
	return nil
}

// evolved is s with ch applied: new optional columns after the others,
// with ids past the highest, and widened types.
func evolved(s *icego.Schema, ch Change) (*icego.Schema, error) {
	fields := s.Fields()
	for _, w := range ch.Widen {
		i := slices.IndexFunc(fields, func(f icego.NestedField) bool { return f.Name == w.Name })
		if i < 0 {
			return nil, fmt.Errorf("widen %s: no such column", w)
		}
		if _, err := icego.PromoteType(fields[i].Type, w.Type); err != nil {
			return nil, fmt.Errorf("widen %s from %s: %w", w, fields[i].Type, err)
		}
		fields[i].Type = w.Type
	}
	next := s.HighestFieldID()
	nextID := func() int { next++; return next }
	for _, a := range ch.Add {
		if _, ok := s.FindFieldByName(a.Name); ok {
			return nil, fmt.Errorf("add %s: the column exists", a)
		}
		// A nested type comes with unassigned (-1) ids: number the new
		// column and its fields past the highest id, depth first, as
		// iceberg-go's UpdateSchema does.
		fresh, err := icego.AssignFreshSchemaIDs(icego.NewSchema(0, icego.NestedField{ID: -1, Name: a.Name, Type: a.Type}), nextID)
		if err != nil {
			return nil, fmt.Errorf("add %s: %w", a, err)
		}
		fields = append(fields, fresh.Fields()[0])
	}
	return icego.NewSchema(s.ID+1, fields...), nil
}

// foreignColumn is another pipeline's schema change landing first.
func (m *Model) foreignColumn(mt *ModelTable) {
	m.foreign++
	name := "foreign_" + strconv.Itoa(m.foreign)
	s, err := evolved(mt.Schema, Change{Add: []Column{{Name: name, Type: icego.PrimitiveTypes.String}}})
	if err != nil {
		panic(fmt.Sprintf("iceberg model: foreign column %s: %v", name, err))
	}
	mt.Schema = s
	mt.commitMetadata()
}

// Append implements Catalog.
func (m *Model) Append(_ context.Context, t *Table, a Append) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, o, err := m.pinned(OpAppend, t)
	if err != nil {
		return err
	}
	m.commitSnapshot(mt, a)
	if o == Ambiguous {
		return fmt.Errorf("iceberg model: append to %s: no answer (it landed)", t.Ident)
	}
	return nil
}

// pinned begins a request pinned to t.Current: the table, the request's
// outcome, or the error it fails with — a conflict if the table moved
// (for an Outcome Conflict, because another writer commits first now).
func (m *Model) pinned(op Op, t *Table) (*ModelTable, Outcome, error) {
	o, err := m.begin(op, t.Ident)
	if err != nil {
		return nil, o, err
	}
	mt, ok := m.tables[t.Ident]
	if !ok {
		return nil, o, fmt.Errorf("%s: %w", t.Ident, ErrNoTable)
	}
	if o == Conflict {
		m.commitSnapshot(mt, Append{Summary: map[string]string{"skipprd.model": "foreign"}})
	}
	if cur := mt.view(t.Ident).Current; cur != t.Current {
		return nil, o, fmt.Errorf("iceberg model: %s %s: snapshot %d, built on %d: %w", op, t.Ident, cur, t.Current, ErrConflict)
	}
	return mt, o, nil
}

// commitSnapshot adds a snapshot of a's files, summary and properties.
func (m *Model) commitSnapshot(mt *ModelTable, a Append) {
	m.snapshots++
	s := Snapshot{ID: m.snapshots, Summary: maps.Clone(a.Summary)}
	if s.Summary == nil {
		s.Summary = map[string]string{}
	}
	s.Summary["operation"] = "append"
	if n := len(mt.Log); n > 0 {
		s.Parent = mt.Log[n-1].ID
	}
	if m.NowMs != nil {
		s.TimestampMs = m.NowMs()
	}
	for _, f := range a.Files {
		mt.Files = append(mt.Files, ModelFile{DataFile: f, Snapshot: s.ID})
	}
	maps.Copy(mt.Props, a.Props)
	mt.Snapshots = append(mt.Snapshots, s)
	mt.Log = append(mt.Log, s)
	if len(a.Files) > 0 {
		mt.Manifests++
		if mt.Manifests >= manifestsMergeMin {
			mt.Manifests = 1 // merged into one
		}
	}
	mt.commitMetadata()
}

// commitMetadata counts a new metadata file: the one it replaces joins
// the metadata log.
func (mt *ModelTable) commitMetadata() {
	mt.Version++
	mt.MetadataLog = min(mt.MetadataLog+1, metadataLogMax)
}

// Expire implements Catalog.
func (m *Model) Expire(_ context.Context, t *Table, r Retention) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, o, err := m.pinned(OpExpire, t)
	if err != nil {
		return err
	}
	kept := retained(mt.Snapshots, r)
	if len(kept) == len(mt.Snapshots) {
		return nil // nothing to expire: no commit
	}
	mt.Snapshots = kept
	mt.commitMetadata()
	if o == Ambiguous {
		return fmt.Errorf("iceberg model: expire %s: no answer (it landed)", t.Ident)
	}
	return nil
}

// Files implements Catalog: the current files, as Load reads (a read
// fails only in an outage or by Decide).
func (m *Model) Files(_ context.Context, t *Table) ([]DataFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, err := m.begin(OpLoad, t.Ident); err != nil || o == Ambiguous {
		return nil, cmp.Or(err, fmt.Errorf("iceberg model: files of %s: no answer", t.Ident))
	}
	mt, ok := m.tables[t.Ident]
	if !ok {
		return nil, fmt.Errorf("%s: %w", t.Ident, ErrNoTable)
	}
	if cur := mt.view(t.Ident).Current; cur != t.Current {
		// The model keeps only the current file list.
		return nil, fmt.Errorf("iceberg model: files of %s at snapshot %d: it is at %d now: %w", t.Ident, t.Current, cur, ErrConflict)
	}
	out := make([]DataFile, len(mt.Files))
	for i, f := range mt.Files {
		out[i] = f.DataFile
	}
	return out, nil
}

// Rewrite implements Catalog. Files it is asked to remove that the
// table does not hold fail it, changing nothing, as iceberg-go's
// replace does.
func (m *Model) Rewrite(_ context.Context, t *Table, r Rewrite) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, o, err := m.pinned(OpRewrite, t)
	if err != nil {
		return err
	}
	removed, kept, err := mt.partition(r.Remove)
	if err != nil {
		return fmt.Errorf("iceberg model: rewrite %s: %w", t.Ident, err)
	}
	mt.Files = kept
	m.commitSnapshot(mt, Append{Files: []DataFile{r.Add}, Summary: r.Summary})
	mt.Log[len(mt.Log)-1].Summary["operation"] = "replace"
	if mt.Rewritten == nil {
		mt.Rewritten = map[string][]ModelFile{}
	}
	mt.Rewritten[r.Add.Path] = removed
	if o == Ambiguous {
		return fmt.Errorf("iceberg model: rewrite %s: no answer (it landed)", t.Ident)
	}
	return nil
}

// partition splits the table's files into those named in remove (in
// remove's order) and the rest; a name it does not hold, or one named
// twice, is an error.
func (mt *ModelTable) partition(remove []DataFile) (removed, kept []ModelFile, err error) {
	at := make(map[string]int, len(remove))
	for i, f := range remove {
		if _, dup := at[f.Path]; dup {
			return nil, nil, fmt.Errorf("file %s named twice", f.Path)
		}
		at[f.Path] = i
	}
	removed = make([]ModelFile, len(remove))
	for _, f := range mt.Files {
		if i, ok := at[f.Path]; ok {
			removed[i] = f
			delete(at, f.Path)
			continue
		}
		kept = append(kept, f)
	}
	if len(at) > 0 {
		return nil, nil, fmt.Errorf("%d of the files to remove are not in the table", len(at))
	}
	return removed, kept, nil
}

// retained is what r keeps of snaps (oldest first): the newest KeepLast,
// and with MaxAgeMs set every one younger than it.
func retained(snaps []Snapshot, r Retention) []Snapshot {
	keep := max(r.KeepLast, 1) // the current snapshot always stays
	var out []Snapshot
	for i, s := range snaps {
		young := r.MaxAgeMs > 0 && s.TimestampMs >= r.NowMs-r.MaxAgeMs
		if i >= len(snaps)-keep || young {
			out = append(out, s)
		}
	}
	return out
}

// Tables returns the model's table names, sorted.
func (m *Model) Tables() []Ident {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := slices.Collect(maps.Keys(m.tables))
	slices.SortFunc(ids, func(a, b Ident) int { return cmp.Compare(a.String(), b.String()) })
	return ids
}

// Table returns a copy of table id's state, or nil if there is none.
func (m *Model) Table(id Ident) *ModelTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.tables[id]
	if !ok {
		return nil
	}
	c := *mt
	c.Props, c.Rewritten = maps.Clone(mt.Props), maps.Clone(mt.Rewritten)
	c.Snapshots, c.Log, c.Files = slices.Clone(mt.Snapshots), slices.Clone(mt.Log), slices.Clone(mt.Files)
	return &c
}
