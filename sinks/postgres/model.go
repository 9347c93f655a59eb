package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// RowState is a CDC row as the destination holds it.
type RowState struct {
	Order   uint64   // the order token of the change the row reflects
	Deleted bool     // a tombstone: deleted at Order
	Values  []string // the change's values, one per source column (ValueStr)
}

// ApplyChange is the CDC apply rule. A change replaces the row its
// identity names only when its order token is greater than the one the
// row reflects (a missing row reflects nothing, so any change creates it).
// A delete leaves a tombstone — the row stays, marked deleted at its
// order — so an older insert or update arriving later cannot resurrect
// it. Changes of equal order are the same change replayed: the first
// stays. Hence applying any set of changes, each any number of times and
// in any order, converges to applying each once in order-token order.
func ApplyChange(cur RowState, exists bool, order uint64, deleted bool, values []string) (RowState, bool) {
	if exists && order <= cur.Order {
		return cur, false
	}
	return RowState{Order: order, Deleted: deleted, Values: values}, true
}

// Model is an in-memory DB: tables, the applied-jobs table, and the CDC
// rule, with every transaction atomic. The simulator drives the real Sink
// against it; Decide, when set, injects what goes wrong with a commit.
// It is safe for concurrent use and starts no goroutine.
type Model struct {
	// Decide returns the fate of one Apply (nil: always Commit). It runs
	// under the model's lock.
	Decide func(tx *Tx) Outcome
	// Down, when set and true, fails every call (an outage) before
	// anything else happens.
	Down func() bool
	// OnCommit, when set, sees every transaction that commits, after its
	// rows are written and before Apply returns (the simulator digests
	// what committed). It runs under the model's lock: it must not call
	// the model.
	OnCommit func(tx *Tx)

	mu      sync.Mutex
	tables  map[string]*ModelTable
	applied []string // job ids in commit order
	// byJob is the applied-jobs table: each id's row.
	byJob map[string]AppliedRow
}

// Outcome is what happens to one transaction in the model.
type Outcome uint8

const (
	Commit          Outcome = iota
	Fail                    // does not commit; a definite error
	FailAmbiguous           // does not commit; the error says the outcome is unknown
	CommitAmbiguous         // commits; the error says the outcome is unknown
	Refuse                  // does not commit; the error wraps engine.ErrCannotApply (a value the server rejects)
)

// ModelTable is one table of the model.
type ModelTable struct {
	Columns []Column
	// Plain tables: every row appended, values by Columns' names (a
	// column the row's job lacked is "(null)").
	Rows []map[string]string
	// CDC tables: the row state by identity.
	State map[string]RowState
}

// ErrModelDown is what the model answers during an outage.
var ErrModelDown = fmt.Errorf("postgres: model: server unavailable")

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{tables: map[string]*ModelTable{}, byJob: map[string]AppliedRow{}}
}

var _ DB = (*Model)(nil)

// modelAppliedJobs names the model's applied-jobs table in messages.
const modelAppliedJobs = "the model's " + AppliedJobsTable

// Apply implements DB. A job id already recorded is compared with tx as
// the real server's is (judge).
func (m *Model) Apply(_ context.Context, tx *Tx) (Found, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Down != nil && m.Down() {
		return NotFound, ErrModelDown
	}
	if row, ok := m.byJob[tx.JobID]; ok {
		return judge(tx, modelAppliedJobs, row)
	}
	t := m.tables[tx.Table]
	var have []Column
	if t != nil {
		have = t.Columns
	}
	change, err := Reconcile(tx.Table, have, tx.Columns)
	if err != nil {
		return NotFound, err
	}
	outcome := Commit
	if m.Decide != nil {
		outcome = m.Decide(tx)
	}
	switch outcome {
	case Fail:
		return NotFound, fmt.Errorf("postgres: model: job %s: transaction failed", tx.JobID)
	case FailAmbiguous:
		return NotFound, fmt.Errorf("postgres: model: job %s: connection lost before COMMIT: %w", tx.JobID, ErrAmbiguous)
	case Refuse:
		return NotFound, fmt.Errorf("%w: postgres: model: job %s: the server rejects a value of table %q", engine.ErrCannotApply, tx.JobID, tx.Table)
	}
	if t == nil {
		t = &ModelTable{State: map[string]RowState{}}
		m.tables[tx.Table] = t
	}
	t.Columns = change.Apply(t.Columns)
	m.write(t, tx)
	m.applied = append(m.applied, tx.JobID)
	m.byJob[tx.JobID] = rowOf(tx)
	if m.OnCommit != nil {
		m.OnCommit(tx)
	}
	if outcome == CommitAmbiguous {
		return NotFound, fmt.Errorf("postgres: model: job %s: connection lost during COMMIT: %w", tx.JobID, ErrAmbiguous)
	}
	return Committed, nil
}

// write applies tx's rows to t.
func (m *Model) write(t *ModelTable, tx *Tx) {
	row := 0
	for _, b := range tx.Batches {
		for i := range int(b.NumRows()) {
			values := rowValues(b, i)
			if !tx.CDC {
				r := map[string]string{}
				for c, f := range tx.Schema.Fields() {
					r[f.Name] = values[c]
				}
				t.Rows = append(t.Rows, r)
				continue
			}
			ch := tx.Changes[row]
			id := string(ch.Identity)
			cur, exists := t.State[id]
			if next, changed := ApplyChange(cur, exists, ch.Order, ch.Kind == segment.Delete, values); changed {
				t.State[id] = next
			}
			row++
		}
	}
}

// rowValues renders row i of b, one string per column.
func rowValues(b arrow.RecordBatch, i int) []string {
	values := make([]string, b.NumCols())
	for c, col := range b.Columns() {
		values[c] = col.ValueStr(i)
	}
	return values
}

// Applied implements DB.
func (m *Model) Applied(_ context.Context, tx *Tx) (Found, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Down != nil && m.Down() {
		return NotFound, ErrModelDown
	}
	row, ok := m.byJob[tx.JobID]
	if !ok {
		return NotFound, nil
	}
	return judge(tx, modelAppliedJobs, row)
}

// AppliedJobs returns the applied-jobs table in commit order.
func (m *Model) AppliedJobs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.applied)
}

// Table returns the table called name, or nil. The caller must not
// modify it, nor read it while Apply may run.
func (m *Model) Table(name string) *ModelTable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tables[name]
}

// Tables returns the names of the model's tables, sorted.
func (m *Model) Tables() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.tables))
	for n := range m.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
