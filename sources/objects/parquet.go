package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
)

// parquetObject ingests one Parquet object, a span of row groups per
// unit, from its acked row group.
type parquetObject struct {
	s      *Source
	ingest IngestFunc
	obj    Object
	key    string // offset key
	ra     *trackedReaderAt
	pf     *file.Reader
	fr     *pqarrow.FileReader
	schema *arrow.Schema
}

// ingestParquet ingests obj from row group first on. It returns nil when
// the last span is acked, errNoRows when the groups left hold no rows.
func (s *Source) ingestParquet(ctx context.Context, ingest IngestFunc, obj Object, key string, first int) error {
	p := &parquetObject{s: s, ingest: ingest, obj: obj, key: key}
	defer p.close()
	if err := p.open(ctx); err != nil {
		return err
	}
	n := p.pf.NumRowGroups()
	if first > n {
		return p.error(-1, fmt.Sprintf("the acked offset says %d row groups are ingested; the file has %d (was it replaced?)", first, n), nil)
	}
	for a := first; a < n; {
		b, rows := p.span(a)
		if rows == 0 {
			return errNoRows // b == n: a span ends early only at a group with rows
		}
		if err := p.send(ctx, a, b, rows); err != nil {
			return err
		}
		a = b
	}
	return nil
}

// open reads the footer and the schema.
func (p *parquetObject) open(ctx context.Context) error {
	ra, err := p.s.store.ReaderAt(ctx, p.obj.Key, p.obj.Size)
	if err != nil {
		return &storeError{err}
	}
	p.ra = &trackedReaderAt{r: ra}
	props := parquet.NewReaderProperties(p.s.cfg.Allocator)
	p.pf, err = file.NewParquetReader(io.NewSectionReader(p.ra, 0, p.obj.Size), file.WithReadProps(props))
	if err != nil {
		return p.readError(-1, "not a readable Parquet file", err)
	}
	p.fr, err = pqarrow.NewFileReader(p.pf, pqarrow.ArrowReadProperties{BatchSize: int64(p.s.cfg.Limits.BatchRows)}, p.s.cfg.Allocator)
	if err != nil {
		return p.readError(-1, "its schema has no Arrow form", err)
	}
	schema, err := p.fr.Schema()
	if err != nil {
		return p.readError(-1, "its schema has no Arrow form", err)
	}
	p.schema = plainSchema(schema)
	return nil
}

func (p *parquetObject) close() {
	if p.pf != nil {
		_ = p.pf.Close() // closes nothing: a SectionReader is no Closer
	}
	if p.ra != nil {
		_ = p.ra.r.Close()
	}
}

// span returns the row groups [a, b) of the next unit and their rows:
// groups while their uncompressed bytes fit ChunkBytes, at least one
// group with rows. Groups of no rows join the span they follow or
// precede, so no span is left with nothing to carry its offset.
func (p *parquetObject) span(a int) (b int, rows int64) {
	md := p.pf.MetaData()
	var size int64
	for b = a; b < p.pf.NumRowGroups(); b++ {
		rg := md.RowGroup(b)
		if rows > 0 && rg.NumRows() > 0 && size+rg.TotalByteSize() > p.s.cfg.ChunkBytes {
			break
		}
		size += rg.TotalByteSize()
		rows += rg.NumRows()
	}
	return b, rows
}

// send reads row groups [a, b) and submits them as one unit; its offset
// is b, marked parquetDone if b is the last.
func (p *parquetObject) send(ctx context.Context, a, b int, rows int64) error {
	batches, err := p.read(ctx, a, b)
	if err != nil {
		return err
	}
	defer func() {
		for _, rb := range batches {
			rb.Release()
		}
	}()
	var got int64
	for _, rb := range batches {
		got += rb.NumRows()
	}
	if got != rows {
		return p.error(a, fmt.Sprintf("row groups %d..%d hold %d rows; the footer says %d", a, b-1, got, rows), nil)
	}
	value := uint64(b)
	if b == p.pf.NumRowGroups() {
		value |= parquetDone
	}
	err = p.s.submit(ctx, p.ingest, p.obj.Key, p.s.unit(p.key, p.schema, batches, value), rows)
	if errors.Is(err, engine.ErrInvalidUnit) {
		return p.error(a, fmt.Sprintf("the host refuses the unit of row groups %d..%d: %v", a, b-1, err), err)
	}
	return err
}

// read returns the batches of row groups [a, b), with the plain schema.
func (p *parquetObject) read(ctx context.Context, a, b int) ([]arrow.RecordBatch, error) {
	groups := make([]int, 0, b-a)
	for g := a; g < b; g++ {
		groups = append(groups, g)
	}
	rr, err := p.fr.GetRecordReader(ctx, nil, groups)
	if err != nil {
		return nil, p.readError(a, "cannot be read", err)
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	release := func() {
		for _, rb := range out {
			rb.Release()
		}
	}
	for rr.Next() {
		rb, err := withSchema(rr.RecordBatch(), p.schema)
		if err != nil {
			release()
			return nil, p.error(a, err.Error(), nil)
		}
		out = append(out, rb)
	}
	if err := rr.Err(); err != nil {
		release()
		return nil, p.readError(a, "cannot be read", err)
	}
	return out, nil
}

// readError is err from the Parquet reader: a *storeError if the store
// failed under it, else an *ObjectError at group (-1: the footer).
func (p *parquetObject) readError(group int, what string, err error) error {
	if serr := p.ra.failed(); serr != nil {
		return &storeError{serr}
	}
	return p.error(group, fmt.Sprintf("%s: %v", what, err), err)
}

func (p *parquetObject) error(group int, reason string, err error) *ObjectError {
	return &ObjectError{Source: p.s.cfg.Name, Object: p.obj.Key, Offset: -1, RowGroup: group, Reason: reason, Err: err}
}

// plainSchema is s without metadata. Parquet writers put per-file
// details there (pandas' index ranges, a writer version); the engine
// keys partitions by fields alone, so two files with the same columns
// must give one schema, not two that compare unequal.
func plainSchema(s *arrow.Schema) *arrow.Schema {
	fields := s.Fields()
	for i := range fields {
		fields[i].Metadata = arrow.Metadata{}
	}
	return arrow.NewSchema(fields, nil)
}

// withSchema returns rb's columns under schema, checking their types:
// array.NewRecordBatch panics on a mismatch.
func withSchema(rb arrow.RecordBatch, schema *arrow.Schema) (arrow.RecordBatch, error) {
	if int(rb.NumCols()) != schema.NumFields() {
		return nil, fmt.Errorf("a batch of %d columns; the schema has %d", rb.NumCols(), schema.NumFields())
	}
	for i, col := range rb.Columns() {
		if f := schema.Field(i); !arrow.TypeEqual(col.DataType(), f.Type) {
			return nil, fmt.Errorf("column %q read as %s; the schema says %s", f.Name, col.DataType(), f.Type)
		}
	}
	return array.NewRecordBatch(schema, rb.Columns(), rb.NumRows()), nil
}

// trackedReaderAt remembers the first error of the store under the
// Parquet reader, which reports it as a read failure like any other: a
// network error must be retried, never taken for a corrupt file.
type trackedReaderAt struct {
	r   ReadAtCloser
	mu  sync.Mutex // the reader may read columns in parallel
	err error
}

func (t *trackedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := t.r.ReadAt(p, off)
	if err != nil && err != io.EOF {
		t.mu.Lock()
		if t.err == nil {
			t.err = err
		}
		t.mu.Unlock()
	}
	return n, err
}

func (t *trackedReaderAt) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
