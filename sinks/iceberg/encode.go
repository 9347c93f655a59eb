package iceberg

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sinks"
)

// The data files of one job, for a table of schema T partitioned by the
// day of column P:
//
//	columns:   the job's file columns (sinks.FileSchema: the job's, then
//	           _cdc_op, _cdc_identity, _cdc_order for a CDC job), each
//	           with T's field id of that name (PARQUET:field_id, nested
//	           fields too) and the Arrow type of T's column — values cast
//	           exactly (types.go): readers find the table's physical type;
//	           _cdc_order, uint64, is decimal(20,0) as in T
//	           [ _ingested_at timestamp[us, UTC]  the ingest time ]  P = _ingested_at only
//	files:     P = _ingested_at: one, its day that of the ingest time;
//	           P a column of the job: one per distinct day of P's values,
//	           ascending, each with that day's rows in job order
//	layout:    sinks.EncodeWith's — the Parquet lake's writer properties,
//	           row-group bounds, one row group buffered at a time — and
//	           its key-value metadata sinks.JobMetadata(job), so the
//	           existing-file check (sinks' judgeFile) knows a replay's
//	           file by its skipprd.content
//
// Every column is optional, nested fields too (map keys excepted). A
// null P refuses the job, and so does a job without P: a row without a
// day has no partition this sink writes. A job without rows gives no
// file. The same inputs give the same bytes (sinks.EncodeWith's
// determinism; the conversions below are pure).
//
// Memory stays what the Parquet lake's encoder holds — one row group
// buffered, one batch converted at a time — besides the files' bytes.
// Splitting by day costs a pass over the job per day (a first pass finds
// the days): time, not memory.

// EncodedFile is one data file of a job: its partition day (days since
// 1970-01-01, UTC), its bytes, its row count and its columns' counts by
// field id — every leaf column's, read back from the file's footer as
// Iceberg's own writers do (a struct, list or map field itself has
// none; a leaf whose counts the footer lacks is left out).
type EncodedFile struct {
	Day     int32
	Body    []byte
	Rows    int64
	Columns map[int]ColumnStats
}

// EncodeFiles encodes job's data files for a table of schema table,
// partitioned by spec (the layout above); ingestedAtUnixMs is the
// ingest time of its rows, for the default spec. The table must hold
// the job's columns (Reconcile, then the Change applied): a column it
// lacks or is narrower in is an ordinary error, for a retry to reconcile
// again; one it cannot hold wraps ErrCannotHold. Errors name the column
// (the caller names the job and the table). It is pure and CPU-heavy:
// sinks call it inside Executor work.
func EncodeFiles(job *engine.Job, table *icego.Schema, spec PartitionSpec, ingestedAtUnixMs int64) ([]EncodedFile, error) {
	src, err := sinks.FileSchema(job)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %w", err)
	}
	p, err := newPlan(src, table, spec)
	if err != nil {
		return nil, err
	}
	if job.Rows() == 0 {
		return nil, nil
	}
	if p.part < 0 {
		return p.ingestedFile(job, ingestedAtUnixMs)
	}
	return p.dayFiles(job)
}

// ingestedFile is the default spec's one file, every row's ingest time
// ingestedAtUnixMs.
func (p *plan) ingestedFile(job *engine.Job, ingestedAtUnixMs int64) ([]EncodedFile, error) {
	f, err := p.encode(job, int32(floorDiv(ingestedAtUnixMs, msPerDay)), func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		return p.convert(rec, ingestedAtUnixMs)
	})
	if err != nil {
		return nil, err
	}
	return []EncodedFile{f}, nil
}

// dayFiles are the files of a spec on a column of the job: one per day.
func (p *plan) dayFiles(job *engine.Job) ([]EncodedFile, error) {
	days, err := p.days(job)
	if err != nil {
		return nil, err
	}
	files := make([]EncodedFile, 0, len(days))
	for _, d := range days {
		f, err := p.encode(job, d, func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
			day, err := p.selectDay(rec, d)
			if err != nil {
				return nil, err
			}
			defer day.Release()
			return p.convert(day, 0)
		})
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

const (
	msPerDay = 86_400_000
	// fieldIDKey is the Arrow field metadata pqarrow writes as the
	// Parquet field id, and Iceberg readers resolve columns by.
	fieldIDKey = "PARQUET:field_id"
)

// plan is how a job's batches become a data file's.
type plan struct {
	schema *arrow.Schema // the data file's
	cols   []convFunc    // per column of the job's file
	// part is the index of the partition column in the job's file, or
	// -1: _ingested_at, which convert appends.
	part int
	unit arrow.TimeUnit // part's
}

// convFunc converts one column's values to the table's Arrow type; the
// caller releases the result.
type convFunc func(arrow.Array) (arrow.Array, error)

// newPlan plans the data files of a job whose file has columns src, for
// table and spec.
func newPlan(src *arrow.Schema, table *icego.Schema, spec PartitionSpec) (*plan, error) {
	if err := checkColumns(src, spec); err != nil {
		return nil, err
	}
	have := topLevel(table)
	p := &plan{part: -1}
	fields := make([]arrow.Field, 0, src.NumFields()+1)
	for _, f := range src.Fields() {
		col, ok := have[f.Name]
		if !ok {
			return nil, fmt.Errorf("iceberg: column %q is not in the table's schema (%s): the table must be evolved first", f.Name, table)
		}
		t, conv, err := converter(f.Name, f.Type, col.Type)
		if err != nil {
			return nil, fmt.Errorf("iceberg: column %q: %w", f.Name, err)
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: t, Nullable: true, Metadata: fieldID(col.ID)})
		p.cols = append(p.cols, conv)
	}
	if spec.SourceColumn == PartitionDefault {
		f, err := ingestedAtField(have)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	} else if err := p.partitionColumn(src, spec.SourceColumn); err != nil {
		return nil, err
	}
	meta := src.Metadata()
	p.schema = arrow.NewSchema(fields, &meta)
	return p, nil
}

// ingestedAtField is the file's field of the ingest time: the table's
// column of that name, a timestamp.
func ingestedAtField(have map[string]icego.NestedField) (arrow.Field, error) {
	col, ok := have[PartitionDefault]
	if !ok {
		return arrow.Field{}, fmt.Errorf("iceberg: the table has no column %q, its partition column", PartitionDefault)
	}
	if !col.Type.Equals(icego.PrimitiveTypes.TimestampTz) {
		return arrow.Field{}, fmt.Errorf("iceberg: column %q: the table's type is %s, the ingest time needs timestamptz: %w",
			PartitionDefault, col.Type, ErrCannotHold)
	}
	return arrow.Field{Name: PartitionDefault, Type: timestampUTC, Nullable: true, Metadata: fieldID(col.ID)}, nil
}

var timestampUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// partitionColumn sets the plan's partition column: name, a timestamp
// column of the job (checkColumns checked its type if present).
func (p *plan) partitionColumn(src *arrow.Schema, name string) error {
	i := src.FieldIndices(name)
	if len(i) == 0 {
		return fmt.Errorf("iceberg: column %q: the table is partitioned by its day, and the job has no such column: every row's day would be null (%w)",
			name, engine.ErrCannotApply)
	}
	p.part, p.unit = i[0], src.Field(i[0]).Type.(*arrow.TimestampType).Unit
	return nil
}

func fieldID(id int) arrow.Metadata {
	return arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(id)})
}

// encode writes one data file of job, of day, its batches converted by
// convert.
func (p *plan) encode(job *engine.Job, day int32, convert func(arrow.RecordBatch) (arrow.RecordBatch, error)) (EncodedFile, error) {
	body, err := sinks.EncodeWith(job, p.schema, sinks.JobMetadata(job), convert)
	if err != nil {
		return EncodedFile{}, fmt.Errorf("iceberg: %w", err)
	}
	rows, cols, err := footerStats(body)
	if err != nil {
		return EncodedFile{}, fmt.Errorf("iceberg: reading back the footer of the file of day %d: %w", day, err)
	}
	return EncodedFile{Day: day, Body: body, Rows: rows, Columns: cols}, nil
}

// convert casts rec, a batch of the job's file, to the data file's
// columns, appending the ingest time (ingestedAtUnixMs) for the default
// spec.
func (p *plan) convert(rec arrow.RecordBatch, ingestedAtUnixMs int64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, p.schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, conv := range p.cols {
		c, err := conv(rec.Column(i))
		if err != nil {
			return nil, fmt.Errorf("iceberg: column %q: %w", p.schema.Field(i).Name, err)
		}
		cols = append(cols, c)
	}
	if p.part < 0 {
		cols = append(cols, constantTimestamp(ingestedAtUnixMs*1000, int(rec.NumRows())))
	}
	return array.NewRecordBatch(p.schema, cols, rec.NumRows()), nil
}

// constantTimestamp is n rows of the instant us (µs), timestamp[us, UTC].
func constantTimestamp(us int64, n int) arrow.Array {
	b := array.NewTimestampBuilder(memory.DefaultAllocator, timestampUTC)
	defer b.Release()
	b.AppendValues(slices.Repeat([]arrow.Timestamp{arrow.Timestamp(us)}, n), nil)
	return b.NewArray()
}

// days are the distinct days of the partition column's values in job,
// ascending. A null refuses the job, naming its row.
func (p *plan) days(job *engine.Job) ([]int32, error) {
	seen := make(map[int32]bool)
	var row int64
	for _, s := range job.Slices {
		for _, b := range s.Batches {
			ts := b.Column(p.part).(*array.Timestamp)
			for i := range ts.Len() {
				if ts.IsNull(i) {
					return nil, fmt.Errorf("iceberg: column %q: row %d of the job is null, and the table is partitioned by the column's day: a null has no partition (%w)",
						p.schema.Field(p.part).Name, row+int64(i), engine.ErrCannotApply)
				}
				d, err := dayOf(int64(ts.Value(i)), p.unit)
				if err != nil {
					return nil, fmt.Errorf("iceberg: column %q: row %d: %w", p.schema.Field(p.part).Name, row+int64(i), err)
				}
				seen[d] = true
			}
			row += b.NumRows()
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// unitsPerDay is how many of each time unit a day holds.
var unitsPerDay = map[arrow.TimeUnit]int64{
	arrow.Second:      86_400,
	arrow.Millisecond: msPerDay,
	arrow.Microsecond: msPerDay * 1_000,
	arrow.Nanosecond:  msPerDay * 1_000_000,
}

// dayOf is the day (since 1970-01-01) of the instant v in unit u, rounded
// down as Iceberg's day transform does.
func dayOf(v int64, u arrow.TimeUnit) (int32, error) {
	d := floorDiv(v, unitsPerDay[u])
	if int64(int32(d)) != d {
		return 0, fmt.Errorf("the timestamp %d %s is beyond the days Iceberg partitions by (%w)", v, u, engine.ErrCannotApply)
	}
	return int32(d), nil
}

// selectDay is the rows of rec whose partition value falls on day, in
// order (checked non-null by days). Rows of one day usually come in a
// few runs, so the batch is cut into runs and each column concatenated.
func (p *plan) selectDay(rec arrow.RecordBatch, day int32) (arrow.RecordBatch, error) {
	ts := rec.Column(p.part).(*array.Timestamp)
	on := func(i int) bool {
		d, err := dayOf(int64(ts.Value(i)), p.unit)
		return err == nil && d == day
	}
	var runs [][2]int64
	for i := 0; i < ts.Len(); {
		j := i
		for j < ts.Len() && on(j) {
			j++
		}
		if j > i {
			runs = append(runs, [2]int64{int64(i), int64(j)})
		}
		i = j + 1
	}
	switch len(runs) {
	case 0:
		return rec.NewSlice(0, 0), nil
	case 1:
		return rec.NewSlice(runs[0][0], runs[0][1]), nil
	}
	return concatRuns(rec, runs)
}

// concatRuns is the rows of rec in runs, each column concatenated.
func concatRuns(rec arrow.RecordBatch, runs [][2]int64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	var rows int64
	for _, r := range runs {
		rows += r[1] - r[0]
	}
	for _, c := range rec.Columns() {
		parts := make([]arrow.Array, len(runs))
		for k, r := range runs {
			parts[k] = array.NewSlice(c, r[0], r[1])
		}
		joined, err := array.Concatenate(parts, memory.DefaultAllocator)
		for _, part := range parts {
			part.Release()
		}
		if err != nil {
			return nil, err
		}
		cols = append(cols, joined)
	}
	return array.NewRecordBatch(rec.Schema(), cols, rows), nil
}

// footerStats reads a data file's row count and its leaf columns' value
// and null counts by field id from its footer, as Iceberg's writers do
// (ParquetUtil.footerMetrics): values count every slot, nulls included.
func footerStats(body []byte) (int64, map[int]ColumnStats, error) {
	r, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	md := r.MetaData()
	cols := make(map[int]ColumnStats)
	unknown := make(map[int]bool)
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			id := int(md.Schema.Column(c).SchemaNode().FieldID())
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return 0, nil, err
			}
			st, err := cc.Statistics()
			if err != nil {
				return 0, nil, err
			}
			if st == nil || !st.HasNullCount() {
				unknown[id] = true
				continue
			}
			cs := cols[id]
			cs.Values += cc.NumValues()
			cs.Nulls += st.NullCount()
			cols[id] = cs
		}
	}
	for id := range unknown {
		delete(cols, id)
	}
	delete(cols, -1) // a column without a field id: none of this sink's
	return md.NumRows, cols, nil
}

// floorDiv is a/b rounded toward minus infinity (b > 0): the day, or
// the microsecond, of an instant before 1970 is the earlier one.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
