package sinks

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// The Parquet file of one job:
//
//	columns:    the job schema's fields, in order
//	          [ _cdc_op       utf8    optional  insert | update | delete
//	            _cdc_identity binary  optional  the event identity
//	            _cdc_order    uint64  optional  the order token ]   CDC jobs only
//	rows:       every slice's batches, slices in job order (segment,
//	            then ordinal: a job spanning segments repeats ordinals)
//	row groups: batches coalesced, up to rowGroupRowsMax rows and about
//	            rowGroupBytesMax Arrow bytes each (a batch is split
//	            across row groups at those bounds)
//	metadata:   the job schema's own metadata; ARROW:schema (the Arrow
//	            schema, so arrow readers get the exact types back); then
//	            the job (JobMetadata): skipprd.compaction_id,
//	            skipprd.content, skipprd.pipeline and skipprd.wal_id (not
//	            for a legacy job, whose Origin is zero), skipprd.segment,
//	            skipprd.segments
//
// Writer properties (writerProperties): format 2.6, data page V1 (the
// most widely read), zstd at its default level, dictionary encoding and
// statistics on, no page index, no bloom filters.
//
// Determinism: the same job gives the same bytes. Encoding runs on one
// goroutine with fixed properties; Parquet metadata holds no time, host
// or random value (created_by is the library's version string, and the
// job's entries are a function of the job); arrow-go emits the
// dictionary in first-seen order; and the zstd encoder compresses
// each page with EncodeAll, single-threaded, whose output depends only on
// the input and the level. A test encodes the same job twice and compares.

// A job is a CDC job when any of its slices carries a sidecar. The engine
// groups a segment's PARTs into jobs by sink, namespace and schema, so a
// namespace with CDC and plain partitions can give a job of both kinds of
// slice; refusing it would stall the namespace for good (the engine
// retries a failed job — all but one it cannot apply — forever), so the
// CDC columns are optional and a
// plain slice's rows carry nulls there: "no change metadata". Every CDC
// file has the same three optional columns, whatever its mix.

// CDC column names. A job schema that already uses one is refused
// (ErrColumnConflict): two columns of one name would make the file
// ambiguous to every reader.
const (
	ColumnCDCOp       = "_cdc_op"
	ColumnCDCIdentity = "_cdc_identity"
	ColumnCDCOrder    = "_cdc_order"
)

// Keys of the job's own entries in a file's key-value metadata, written
// after every other entry in this order (pipeline and WAL id only for a
// job with an Origin). A sink that finds a file under a job's id reads
// them back from the footer and compares skipprd.content with
// Job.Content (existing.go); the others are there for the message and
// for people:
//
//	skipprd.segment   the segment whose cut ends the job (Job.Segment),
//	                  e.g. 000000000001-000000000009
//	skipprd.segments  the segments holding its rows (Job.Segments): how
//	                  many, then the first and last, e.g.
//	                  "3 000000000001-000000000004..000000000001-000000000009"
//	                  (a lane's segments need not be consecutive ids: a
//	                  segment without a PART of the lane is not counted)
const (
	MetaCompactionID = "skipprd.compaction_id"
	MetaContent      = "skipprd.content"
	MetaPipeline     = "skipprd.pipeline"
	MetaWALID        = "skipprd.wal_id"
	MetaSegment      = "skipprd.segment"
	MetaSegments     = "skipprd.segments"
)

// JobMetadata returns the key-value entries a job's file records about
// the job, in the order they are written.
func JobMetadata(job *engine.Job) [][2]string {
	kv := [][2]string{{MetaCompactionID, job.ID}, {MetaContent, job.Content}}
	if !job.Origin.IsZero() {
		kv = append(kv, [2]string{MetaPipeline, job.Origin.Pipeline}, [2]string{MetaWALID, job.Origin.WAL.String()})
	}
	return append(kv, [2]string{MetaSegment, job.Segment.String()}, [2]string{MetaSegments, SegmentsText(job)})
}

// SegmentsText is the value of skipprd.segments for job: the number of
// segments holding its rows, then the first and the last. A job that
// lists no Segments (a segment committed before jobs spanned segments,
// or a test's) holds its own segment's rows only.
func SegmentsText(job *engine.Job) string {
	segs := job.Segments
	if len(segs) == 0 {
		segs = []engine.SnapshotID{job.Segment}
	}
	return fmt.Sprintf("%d %s..%s", len(segs), segs[0], segs[len(segs)-1])
}

// Row groups are bounded by rows and by Arrow bytes: a job's file may
// hold many segments' rows (a lane's file_bytes, 128 MiB by default and
// up to 1 GiB), and a reader decodes a row group whole, so a file is
// split into row groups of about rowGroupBytesMax (the Arrow bytes of
// its batches; Parquet's encoded and compressed pages are smaller). The
// writer buffers one row group at a time.
const (
	rowGroupRowsMax  = 1 << 20
	rowGroupBytesMax = 64 << 20
)

// rowGroupLimits bound one row group: at most rows rows and, unless it
// holds a single row, about bytes Arrow bytes.
type rowGroupLimits struct{ rows, bytes int64 }

var defaultRowGroups = rowGroupLimits{rows: rowGroupRowsMax, bytes: rowGroupBytesMax}

// Errors for a job that cannot be written. Every encoding failure wraps
// ErrUnencodable, and it is permanent: retrying the same job fails the
// same way, so it wraps engine.ErrCannotApply — the engine refuses the
// job, alerts and stops that (sink, namespace) lane rather than retry it.
// Besides the two below, the Parquet library refuses some Arrow
// data: types it cannot write (run-end encoded, list views), a list slot
// that is null but spans values (Arrow's C++ and Go writers alike), and
// timestamp[s] values beyond the millisecond range.
var (
	ErrUnencodable = fmt.Errorf("sinks: job cannot be written as Parquet: %w", engine.ErrCannotApply)
	// ErrColumnConflict: a CDC job's schema already has a _cdc_* column.
	ErrColumnConflict = errors.New("sinks: schema column conflicts with a CDC column")
	// ErrBadJob: the job breaks its own invariants (no slices, slices of
	// different schemas, a sidecar whose rows do not match the batches).
	ErrBadJob = errors.New("sinks: malformed job")
)

func writerProperties(mem memory.Allocator, rowGroupRows int64) *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithAllocator(mem),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithDataPageVersion(parquet.DataPageV1),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(compress.DefaultCompressionLevel),
		parquet.WithDictionaryDefault(true),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(rowGroupRows),
	)
}

func arrowWriterProperties(mem memory.Allocator) pqarrow.ArrowWriterProperties {
	return pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem))
}

// EncodeParquet encodes job as one Parquet file (layout above). It is
// pure and CPU-heavy: sinks call it inside Executor work. job is only
// read. Errors name the job's ID and namespace.
func EncodeParquet(job *engine.Job) ([]byte, error) {
	b, err := encodeJob(job)
	if err != nil {
		return nil, fmt.Errorf("sinks: encode job %s (namespace %q): %w", job.ID, job.Namespace, err)
	}
	return b, nil
}

// encodeJob is EncodeParquet without the job in its errors; they wrap
// ErrUnencodable. A panic inside the Parquet library becomes an error: a
// job that trips a library bug then stalls its sink instead of killing
// the process at every restart.
func encodeJob(job *engine.Job) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("parquet encoder panicked: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrUnencodable, err)
		}
	}()
	schema, cdc, err := fileSchema(job)
	if err != nil {
		return nil, err
	}
	return encode(job, schema, cdc, JobMetadata(job), defaultRowGroups)
}

// FileSchema returns the Arrow schema of job's file (the layout above:
// the job's columns, then the CDC columns for a CDC job), after the
// checks EncodeParquet makes; its errors wrap ErrUnencodable. Other sinks
// that write a job as Parquet (sinks/iceberg) start from it.
func FileSchema(job *engine.Job) (*arrow.Schema, error) {
	schema, _, err := fileSchema(job)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnencodable, err)
	}
	return schema, nil
}

// EncodeWith encodes job as one Parquet file of schema, with kv appended
// to its key-value metadata, as EncodeParquet does (the same writer
// properties, row-group bounds, slice order and CDC columns) but with
// every batch passed through convert first: convert gets a batch of
// FileSchema(job) — a batch of the job, its CDC columns appended — and
// returns a batch of schema's columns that the encoder writes and then
// releases (it may hold fewer rows, none, or its argument retained).
// Row groups are bounded by the converted batches' rows and bytes.
// Errors wrap ErrUnencodable and name the job.
func EncodeWith(job *engine.Job, schema *arrow.Schema, kv [][2]string, convert func(arrow.RecordBatch) (arrow.RecordBatch, error)) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("parquet encoder panicked: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("sinks: encode job %s (namespace %q): %w: %w", job.ID, job.Namespace, ErrUnencodable, err)
		}
	}()
	src, cdc, err := fileSchema(job)
	if err != nil {
		return nil, err
	}
	return encodeWith(job, schema, cdc, kv, defaultRowGroups, &conversion{src: src, fn: convert})
}

// EncodeBatches encodes the batches each hands its write, each of
// schema's columns, as one Parquet file of schema with kv appended to
// its key-value metadata: the lake's writer properties and row-group
// bounds, batches in the order written (write does not keep a batch;
// the caller releases it). It is for rows already in a file's form —
// read back from lake files to be rewritten into one — where EncodeWith
// is for a job's. Pure and CPU-heavy, like EncodeWith; errors wrap
// ErrUnencodable.
func EncodeBatches(schema *arrow.Schema, kv [][2]string, each func(write func(arrow.RecordBatch) error) error) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("parquet encoder panicked: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("sinks: encode batches: %w: %w", ErrUnencodable, err)
		}
	}()
	mem := memory.DefaultAllocator
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(schema, &buf, writerProperties(mem, defaultRowGroups.rows), arrowWriterProperties(mem))
	if err != nil {
		return nil, err
	}
	g := &groupWriter{fw: fw, schema: schema, mem: mem, lim: defaultRowGroups}
	n := 0
	err = each(func(b arrow.RecordBatch) error {
		n++
		if err := sameColumns(b, schema); err != nil {
			return fmt.Errorf("batch %d: %w", n, err)
		}
		return g.write(b, nil)
	})
	for _, e := range kv {
		if err == nil {
			err = fw.AppendKeyValueMetadata(e[0], e[1])
		}
	}
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// conversion is EncodeWith's: the schema of the batches convert gets,
// and convert.
type conversion struct {
	src *arrow.Schema
	fn  func(arrow.RecordBatch) (arrow.RecordBatch, error)
}

// encode writes job's file with kv appended to its key-value metadata
// (tests pass nil for a file as builds before JobMetadata wrote it), in
// row groups within lim.
func encode(job *engine.Job, schema *arrow.Schema, cdc bool, kv [][2]string, lim rowGroupLimits) ([]byte, error) {
	return encodeWith(job, schema, cdc, kv, lim, nil)
}

// encodeWith is encode with every batch converted by conv first (nil:
// written as it is, the Parquet lake's file).
func encodeWith(job *engine.Job, schema *arrow.Schema, cdc bool, kv [][2]string, lim rowGroupLimits, conv *conversion) (out []byte, err error) {
	mem := memory.DefaultAllocator
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(schema, &buf, writerProperties(mem, lim.rows), arrowWriterProperties(mem))
	if err != nil {
		return nil, err
	}
	for _, e := range kv {
		if err := fw.AppendKeyValueMetadata(e[0], e[1]); err != nil {
			_ = fw.Close()
			return nil, err
		}
	}
	defer func() {
		if cerr := fw.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err == nil {
			out = buf.Bytes()
		}
	}()
	g := &groupWriter{fw: fw, schema: schema, mem: mem, lim: lim}
	write := g.write
	if conv != nil {
		write = func(b arrow.RecordBatch, rows []segment.CDCRow) error { return g.writeConverted(b, rows, conv) }
	}
	for i, s := range job.Slices {
		var first int // the sidecar row of the batch's first row
		for _, b := range s.Batches {
			n := int(b.NumRows())
			var rows []segment.CDCRow // nil: a plain slice, nulls
			if cdc && s.Sidecar != nil {
				rows = s.Sidecar.Rows[first : first+n]
			}
			if err := write(b, rows); err != nil {
				return nil, fmt.Errorf("%s: %w", sliceName(i, s), err)
			}
			first += n
		}
	}
	return nil, nil
}

// sliceName names the i-th slice of a job in messages: its ordinal alone
// is ambiguous in a job that spans segments.
func sliceName(i int, s *segment.Slice) string {
	return fmt.Sprintf("slice %d (ordinal %d)", i, s.Entry.Ordinal)
}

// groupWriter writes batches into row groups within lim: a batch goes
// into the open row group while it fits, is split at a bound, and the
// rest goes on in a new one. Where a batch's bytes fall is estimated
// from its average row.
type groupWriter struct {
	fw          *pqarrow.FileWriter
	schema      *arrow.Schema
	mem         memory.Allocator
	lim         rowGroupLimits
	rows, bytes int64 // in the open row group
}

// write writes b with its CDC rows (nil: none, or a plain slice).
func (g *groupWriter) write(b arrow.RecordBatch, rows []segment.CDCRow) error {
	n := b.NumRows()
	if n == 0 {
		return writeBatch(g.fw, g.schema, b, rows, g.mem) // an empty batch adds nothing to bound
	}
	perRow := (arrowBytes(b) + n - 1) / n
	for off := int64(0); off < n; {
		take := g.fits(n-off, perRow)
		if take == 0 {
			if err := g.fw.NewBufferedRowGroupChecked(); err != nil {
				return err
			}
			g.rows, g.bytes = 0, 0
			continue
		}
		if err := g.writeRange(b, rows, off, take); err != nil {
			return err
		}
		g.rows, g.bytes, off = g.rows+take, g.bytes+take*perRow, off+take
	}
	return nil
}

// writeConverted writes b, its CDC columns (rows; nil: nulls) appended
// when conv.src has them, after conv.fn: the converted batch is bounded
// into row groups as any other.
func (g *groupWriter) writeConverted(b arrow.RecordBatch, rows []segment.CDCRow, conv *conversion) error {
	cols := append([]arrow.Array(nil), b.Columns()...)
	if conv.src.NumFields() > len(cols) {
		extra := cdcColumns(rows, int(b.NumRows()), g.mem)
		defer func() {
			for _, a := range extra {
				a.Release()
			}
		}()
		cols = append(cols, extra...)
	}
	full := array.NewRecordBatch(conv.src, cols, b.NumRows())
	defer full.Release()
	out, err := conv.fn(full)
	if err != nil {
		return err
	}
	defer out.Release()
	if err := sameColumns(out, g.schema); err != nil {
		return err
	}
	return g.write(out, nil)
}

// sameColumns checks that b's columns are schema's, so the writer never
// pads a converted batch with CDC columns or mistypes a column.
func sameColumns(b arrow.RecordBatch, schema *arrow.Schema) error {
	if int(b.NumCols()) != schema.NumFields() {
		return fmt.Errorf("a converted batch has %d columns, the file %d", b.NumCols(), schema.NumFields())
	}
	for i, f := range schema.Fields() {
		if !arrow.TypeEqual(b.Column(i).DataType(), f.Type) {
			return fmt.Errorf("a converted batch's column %q is %s, the file's %s", f.Name, b.Column(i).DataType(), f.Type)
		}
	}
	return nil
}

// arrowBytes is the size of b's buffers (a slice's: its buffers whole).
func arrowBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, buf := range d.Buffers() {
		if buf != nil {
			n += int64(buf.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		n += dataBytes(dict)
	}
	return n
}

// fits is how many of left rows of perRow bytes the open row group
// takes; an empty one takes at least one.
func (g *groupWriter) fits(left, perRow int64) int64 {
	room := g.lim.rows - g.rows
	if perRow > 0 {
		room = min(room, (g.lim.bytes-g.bytes)/perRow)
	}
	if g.rows == 0 {
		room = max(room, 1)
	}
	return max(min(room, left), 0)
}

// writeRange writes rows off..off+take of b (b itself when that is all
// of it).
func (g *groupWriter) writeRange(b arrow.RecordBatch, rows []segment.CDCRow, off, take int64) error {
	if off == 0 && take == b.NumRows() {
		return writeBatch(g.fw, g.schema, b, rows, g.mem)
	}
	part := b.NewSlice(off, off+take)
	defer part.Release()
	if rows != nil {
		rows = rows[off : off+take]
	}
	return writeBatch(g.fw, g.schema, part, rows, g.mem)
}

// writeBatch writes b's columns, and for a CDC job the CDC columns of rows,
// as a record of schema (the slice's own schema object may differ in
// metadata; the columns are what counts).
func writeBatch(fw *pqarrow.FileWriter, schema *arrow.Schema, b arrow.RecordBatch, rows []segment.CDCRow, mem memory.Allocator) error {
	cols := append([]arrow.Array(nil), b.Columns()...)
	if schema.NumFields() > len(cols) {
		extra := cdcColumns(rows, int(b.NumRows()), mem)
		defer func() {
			for _, a := range extra {
				a.Release()
			}
		}()
		cols = append(cols, extra...)
	}
	rec := array.NewRecordBatch(schema, cols, b.NumRows())
	defer rec.Release()
	return fw.WriteBuffered(rec)
}

// cdcColumns builds the three CDC columns of n rows: rows, or nulls if
// rows is nil.
func cdcColumns(rows []segment.CDCRow, n int, mem memory.Allocator) []arrow.Array {
	op := array.NewStringBuilder(mem)
	id := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	order := array.NewUint64Builder(mem)
	defer op.Release()
	defer id.Release()
	defer order.Release()
	op.Reserve(n)
	id.Reserve(n)
	order.Reserve(n)
	if rows == nil {
		op.AppendNulls(n)
		id.AppendNulls(n)
		order.AppendNulls(n)
	}
	for _, r := range rows {
		op.Append(r.Kind.String())
		id.Append(r.Identity)
		order.Append(r.Order)
	}
	return []arrow.Array{op.NewArray(), id.NewArray(), order.NewArray()}
}

// fileSchema returns the schema of job's file and whether it is a CDC
// job, after checking what the encoder relies on: at least one slice, one
// schema, sidecars aligned with the batches.
func fileSchema(job *engine.Job) (*arrow.Schema, bool, error) {
	if len(job.Slices) == 0 {
		return nil, false, fmt.Errorf("%w: no slices", ErrBadJob)
	}
	first := job.Slices[0]
	cdc := false
	for i, s := range job.Slices {
		if s.Schema == nil || !s.Schema.Equal(first.Schema) {
			return nil, false, fmt.Errorf("%w: %s has schema %v, %s has %v",
				ErrBadJob, sliceName(i, s), s.Schema, sliceName(0, first), first.Schema)
		}
		cdc = cdc || s.Sidecar != nil
		if err := checkRows(i, s); err != nil {
			return nil, false, err
		}
	}
	if !cdc {
		return first.Schema, false, nil
	}
	fields := slices.Clone(first.Schema.Fields())
	for _, f := range fields {
		if f.Name == ColumnCDCOp || f.Name == ColumnCDCIdentity || f.Name == ColumnCDCOrder {
			return nil, false, fmt.Errorf("%w: %q", ErrColumnConflict, f.Name)
		}
	}
	fields = append(fields,
		arrow.Field{Name: ColumnCDCOp, Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: ColumnCDCIdentity, Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: ColumnCDCOrder, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
	)
	meta := first.Schema.Metadata()
	return arrow.NewSchema(fields, &meta), true, nil
}

// checkRows checks that s, the i-th slice of its job, has batches that
// hold Entry.Rows rows and, for a CDC slice, a sidecar with one valid row
// per Arrow row.
func checkRows(i int, s *segment.Slice) error {
	var rows int64
	for _, b := range s.Batches {
		if !b.Schema().Equal(s.Schema) {
			return fmt.Errorf("%w: %s: a batch of schema %v in a slice of %v", ErrBadJob, sliceName(i, s), b.Schema(), s.Schema)
		}
		rows += b.NumRows()
	}
	if rows != s.Entry.Rows {
		return fmt.Errorf("%w: %s: batches hold %d rows, the entry says %d", ErrBadJob, sliceName(i, s), rows, s.Entry.Rows)
	}
	if s.Sidecar == nil {
		return nil
	}
	if int64(len(s.Sidecar.Rows)) != rows {
		return fmt.Errorf("%w: %s: sidecar has %d rows, batches %d", ErrBadJob, sliceName(i, s), len(s.Sidecar.Rows), rows)
	}
	if err := s.Sidecar.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadJob, sliceName(i, s), err)
	}
	return nil
}
