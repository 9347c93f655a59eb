package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sinks/iceberg/sqlcatalog"
	"github.com/skipprd/skipprd/sources/generator"
)

// verdict is chaos mode's judgement of the lake against what was
// acknowledged, record id by record id.
type verdict struct {
	Acked      uint64 // records the committed offsets say were acked
	FoundOnce  uint64 // acked records the lake holds exactly once
	Duplicates uint64 // extra copies in the lake of acked records
	Missing    uint64 // acked records the lake lacks
	Unexpected uint64 // copies in the lake of records never acked
}

// clean: every acked record is in the lake exactly once, and nothing
// else is.
func (v verdict) clean() bool {
	return v.Duplicates == 0 && v.Missing == 0 && v.Unexpected == 0 && v.FoundOnce == v.Acked
}

func (v verdict) String() string {
	word := "CLEAN"
	if !v.clean() {
		word = "NOT CLEAN"
	}
	return fmt.Sprintf("chaos verdict: %s acked=%d found_once=%d duplicates=%d missing=%d unexpected=%d",
		word, v.Acked, v.FoundOnce, v.Duplicates, v.Missing, v.Unexpected)
}

// judge compares, per namespace, the ids of the acked records with the
// copies of each id the lake holds. Generator ids are distinct per
// record, so an id stands for its record.
func judge(acked map[string][]string, lake map[string]map[string]uint64) verdict {
	var v verdict
	for ns, ids := range lake {
		want := map[string]bool{}
		for _, id := range acked[ns] {
			want[id] = true
		}
		for id, copies := range ids {
			if !want[id] {
				v.Unexpected += copies
			}
		}
	}
	for ns, ids := range acked {
		for _, id := range ids {
			v.Acked++
			switch copies := lake[ns][id]; copies {
			case 0:
				v.Missing++
			case 1:
				v.FoundOnce++
			default:
				v.FoundOnce++
				v.Duplicates += copies - 1
			}
		}
	}
	return v
}

// ackedIDs regenerates, per namespace, the ids of the records the
// generator's committed offsets say were acked: a partition at offset n
// has had records [0, n) acked, and a record is a pure function of its
// offset. Offsets of other sources are not the judge's.
func ackedIDs(offsets segment.Offsets) (map[string][]string, error) {
	gen := generator.New(generator.Config{})
	out := map[string][]string{}
	const chunk = 10_000
	for _, o := range offsets {
		rest, ok := strings.CutPrefix(o.Key, generator.DefaultKeyPrefix+"/")
		if !ok {
			continue
		}
		ns, p, _ := strings.Cut(rest, "/")
		part, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("offset key %q: %w", o.Key, err)
		}
		for from := uint64(0); from < o.Value; from += chunk {
			rec, err := gen.Records(ns, part, from, int(min(chunk, o.Value-from)))
			if err != nil {
				return nil, fmt.Errorf("offset %s=%d: %w", o.Key, o.Value, err)
			}
			ids := map[string]uint64{}
			err = addIDs(rec.Column(0), ids)
			rec.Release()
			if err != nil {
				return nil, err
			}
			for id := range ids {
				out[ns] = append(out[ns], id)
			}
		}
	}
	return out, nil
}

// lakeRecordIDs reads every Parquet file under lake/{namespace}/… and counts
// the copies of each record id (the first column) per namespace. An
// Iceberg warehouse (the default lake) is read by its tables' current
// snapshots instead: the files a reader reads, not every file the folder
// holds.
func lakeRecordIDs(ctx context.Context, lake string) (map[string]map[string]uint64, error) {
	if _, err := os.Stat(filepath.Join(lake, icebergCatalogFile)); err == nil {
		return icebergRecordIDs(ctx, lake)
	}
	out := map[string]map[string]uint64{}
	err := filepath.WalkDir(lake, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		rel, _ := filepath.Rel(lake, path)
		ns, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if out[ns] == nil {
			out[ns] = map[string]uint64{}
		}
		return countIDs(ctx, path, out[ns])
	})
	return out, err
}

// countIDs adds the first column's values of one Parquet file to ids.
func countIDs(ctx context.Context, path string, ids map[string]uint64) error {
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer tbl.Release()
	for _, chunk := range tbl.Column(0).Data().Chunks() {
		if err := addIDs(chunk, ids); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

func addIDs(col arrow.Array, ids map[string]uint64) error {
	switch a := col.(type) {
	case *array.String:
		for i := range a.Len() {
			ids[a.Value(i)]++
		}
	case *array.Int64:
		for i := range a.Len() {
			ids[strconv.FormatInt(a.Value(i), 10)]++
		}
	default:
		return fmt.Errorf("the first column is %s, not a record id", col.DataType())
	}
	return nil
}

// judge is the judged chaos run's last act, after its graceful close:
// the lake against the committed offsets. It prints the verdict and
// returns 0 for a clean one.
func (d *daemon) judge(stdout io.Writer, pf *pipelineFile) int {
	ctx := context.Background()
	offsets, err := d.host.Offsets(ctx) // the state the closed engine was left in
	if err != nil {
		d.log.Error("chaos mode: reading the committed offsets", "err", err)
		return 1
	}
	lake := pf.Sinks[0].dir(d.cfg.DataDir)
	ids, err := lakeRecordIDs(ctx, lake)
	if err != nil {
		d.log.Error("chaos mode: reading the lake", "dir", lake, "err", err)
		return 1
	}
	acked, err := ackedIDs(offsets)
	if err != nil {
		d.log.Error("chaos mode: regenerating the acked records", "err", err)
		return 1
	}
	v := judge(acked, ids)
	fmt.Fprintln(stdout, v)
	if !v.clean() {
		d.log.Error("chaos mode: the lake does not hold every acked record exactly once", "verdict", v.String())
		return 1
	}
	return 0
}

// icebergRecordIDs counts the record ids of the tables of the default
// Iceberg namespace in the warehouse folder lake, per table.
func icebergRecordIDs(ctx context.Context, lake string) (map[string]map[string]uint64, error) {
	abs, err := filepath.Abs(lake)
	if err != nil {
		return nil, err
	}
	cat, err := sqlcatalog.Open(ctx, sqlcatalog.Config{URI: "sqlite://" + filepath.Join(abs, icebergCatalogFile), Warehouse: "file://" + abs})
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	ids, err := cat.Tables(ctx, icebergNamespaceDefault)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]uint64{}
	for _, id := range ids {
		files, err := cat.DataFiles(ctx, id)
		if err != nil {
			return nil, err
		}
		out[id.Name] = map[string]uint64{}
		for _, f := range files {
			if err := countIDs(ctx, strings.TrimPrefix(f, "file://"), out[id.Name]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
