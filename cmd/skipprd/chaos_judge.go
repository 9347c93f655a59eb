package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/generator"
)

// verdict is chaos mode's judgement of the lake against what was
// acknowledged.
type verdict struct {
	Acked      uint64 // records the committed offsets say were acked
	FoundOnce  uint64 // record ids the lake holds exactly once
	Duplicates uint64 // extra copies in the lake
	Missing    uint64 // acked records the lake lacks
	Unexpected uint64 // records the lake holds beyond what was acked
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

// judge compares the records acked per namespace with the copies of each
// record id the lake holds per namespace. Generator ids are distinct per
// record, so distinct ids count records.
func judge(acked map[string]uint64, lake map[string]map[string]uint64) verdict {
	var v verdict
	names := make([]string, 0, len(acked)+len(lake))
	for ns := range acked {
		names = append(names, ns)
	}
	for ns := range lake {
		names = append(names, ns)
	}
	slices.Sort(names)
	for _, ns := range slices.Compact(names) {
		want, ids := acked[ns], lake[ns]
		v.Acked += want
		for _, copies := range ids {
			if copies == 1 {
				v.FoundOnce++
			}
			v.Duplicates += copies - 1
		}
		if distinct := uint64(len(ids)); distinct < want {
			v.Missing += want - distinct
		} else {
			v.Unexpected += distinct - want
		}
	}
	return v
}

// ackedByNamespace sums the generator's committed offsets per namespace:
// a partition at offset n has had records [0, n) acked.
func ackedByNamespace(offsets segment.Offsets) map[string]uint64 {
	out := map[string]uint64{}
	for _, o := range offsets {
		rest, ok := strings.CutPrefix(o.Key, generator.DefaultKeyPrefix+"/")
		if !ok {
			continue
		}
		ns, _, _ := strings.Cut(rest, "/")
		out[ns] += o.Value
	}
	return out
}

// lakeRecordIDs reads every Parquet file under lake/{namespace}/… and counts
// the copies of each record id (the first column) per namespace.
func lakeRecordIDs(ctx context.Context, lake string) (map[string]map[string]uint64, error) {
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
	v := judge(ackedByNamespace(offsets), ids)
	fmt.Fprintln(stdout, v)
	if !v.clean() {
		d.log.Error("chaos mode: the lake does not hold every acked record exactly once", "verdict", v.String())
		return 1
	}
	return 0
}
