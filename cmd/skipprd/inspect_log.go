package main

// The disk log under DATA_DIR/wal read whole, file by file, under the
// rules recovery applies (wal.PartitionScan), changing nothing: no
// fsync, no cut tail, nothing deleted. skipprd inspect prints it; the
// start-up owner check (owner_inspect.go) counts its unflushed units.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/wal"
)

// logFileMax bounds the read of one log file: a file of the largest
// segment size holding one entry of the largest size, with alignment.
const logFileMax = wal.SegmentBytesMax + wal.EntryPayloadMax + 4*engine.DirectAlign

// logView is what the log holds.
type logView struct {
	Partitions []logPartition // ascending by partition
	seals      []logSeal      // every seal read, in log order per partition
	flushed    map[wal.SnapshotRef]bool
	// held: per partition, the unit sequence numbers read and not dropped
	// by a later header (a poisoned batch, never acked).
	held map[uint32]map[uint64]bool
	// newest is the directory of the most recently sealed generation
	// ("{prefix}/{pipeline}/p_year=…/"), "" if none: who wrote the log.
	newest   string
	newestMs int64
}

// logPartition is one partition's files, in number order.
type logPartition struct {
	Partition uint32
	Files     []logFile
	// Halted is the damage that stopped the scan (recovery halts the
	// partition on it); the files after the one it names were not read.
	Halted error
}

// logFile is one segment file of the log.
type logFile struct {
	Num   uint64
	Path  string
	Bytes int64
	Torn  bool // its tail was torn by a crash (recovery cuts it)
	// Units is how many unit records were read from it; FirstSeq and
	// LastSeq their sequence numbers (consecutive), 0 and 0 with none.
	Units             int
	FirstSeq, LastSeq uint64
	Seals, Flushed    []wal.SnapshotRef // the seal and flushed records in it
}

// logSeal is one seal record: a generation's units in one partition.
type logSeal struct {
	part   uint32
	file   uint64
	id     wal.SnapshotRef
	ranges []wal.SeqRange
}

// readLog reads every partition of the log under dataDir; a log that
// does not exist is empty. Damage does not fail it: the partition's
// Halted says what and where, as recovery would halt it.
func readLog(dataDir string) (*logView, error) {
	v := &logView{flushed: map[wal.SnapshotRef]bool{}, held: map[uint32]map[uint64]bool{}}
	names, err := os.ReadDir(filepath.Join(dataDir, wal.Root))
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	var parts []uint32
	for _, n := range names {
		if part, ok := wal.ParsePartitionDir(n.Name()); ok && n.IsDir() {
			parts = append(parts, part)
		}
	}
	slices.Sort(parts) // partition-10 lists before partition-2
	for _, part := range parts {
		pv, err := readPartitionAgain(dataDir, part)
		if err != nil {
			return nil, err
		}
		v.merge(pv)
	}
	return v, nil
}

// A running daemon writes the log while it is read: a file read part
// before and part after a write can look damaged (zeros, then a valid
// entry), and a file flushed meanwhile is deleted. So, as recovery does,
// a partition that does not read clean is read again, up to
// logReadAttempts times, logReadPause apart; what stays damaged is.
const (
	logReadAttempts = 5
	logReadPause    = 20 * time.Millisecond
)

// readPartitionAgain reads partition part into a view of its own,
// again while it does not read clean.
func readPartitionAgain(dataDir string, part uint32) (*logView, error) {
	for attempt := 1; ; attempt++ {
		pv := &logView{flushed: map[wal.SnapshotRef]bool{}, held: map[uint32]map[uint64]bool{}}
		err := pv.readPartition(dataDir, part)
		clean := err == nil && pv.Partitions[0].Halted == nil
		if clean || attempt == logReadAttempts || err != nil && !errors.Is(err, fs.ErrNotExist) {
			return pv, err
		}
		time.Sleep(logReadPause)
	}
}

// merge adds the partitions read into o to v.
func (v *logView) merge(o *logView) {
	v.Partitions = append(v.Partitions, o.Partitions...)
	v.seals = append(v.seals, o.seals...)
	for id := range o.flushed {
		v.flushed[id] = true
	}
	for part, have := range o.held {
		v.held[part] = have
	}
	if o.newest != "" && (v.newest == "" || o.newestMs >= v.newestMs) {
		v.newest, v.newestMs = o.newest, o.newestMs
	}
}

// readPartition feeds partition part's files, in number order, to a
// wal.PartitionScan and notes what each holds.
func (v *logView) readPartition(dataDir string, part uint32) error {
	nums, err := logFileNums(filepath.Join(dataDir, filepath.FromSlash(wal.PartitionDir(part))))
	if err != nil {
		return err
	}
	p := logPartition{Partition: part, Files: make([]logFile, 0, len(nums))}
	have := map[uint64]bool{}
	v.held[part] = have
	var f *logFile // the file being read
	hooks := wal.PartitionHooks{
		Unit: func(_ uint64, rec *wal.UnitRecord) {
			have[rec.Seq] = true
			if f.Units == 0 {
				f.FirstSeq = rec.Seq
			}
			f.Units, f.LastSeq = f.Units+1, rec.Seq
		},
		Seal: func(_ uint64, rec *wal.SealRecord) {
			f.Seals = append(f.Seals, rec.Snapshot)
			v.seals = append(v.seals, logSeal{part, f.Num, rec.Snapshot, slices.Clone(rec.Ranges)})
			if v.newest == "" || rec.CreatedUnixMs >= v.newestMs {
				v.newest, v.newestMs = rec.Dir, rec.CreatedUnixMs
			}
		},
		Flushed: func(_ uint64, rec *wal.FlushedRecord) {
			f.Flushed = append(f.Flushed, rec.Snapshot)
			v.flushed[rec.Snapshot] = true
		},
		Drop: func(seq uint64) { delete(have, seq) },
	}
	scan := wal.NewPartitionScan(part)
	for _, num := range nums {
		path := filepath.Join(dataDir, filepath.FromSlash(wal.SegmentPath(part, num)))
		b, err := readLogFile(path)
		if err != nil {
			return err
		}
		p.Files = append(p.Files, logFile{Num: num, Path: path, Bytes: int64(len(b))})
		f = &p.Files[len(p.Files)-1]
		f.Torn = scan.Add(num, path, b, hooks)
	}
	p.Halted = scan.Halted
	v.Partitions = append(v.Partitions, p)
	return nil
}

// logFileNums lists the segment file numbers in dir, ascending.
func logFileNums(dir string) ([]uint64, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	var nums []uint64
	for _, f := range files {
		if num, ok := wal.ParseSegmentName(f.Name()); ok {
			nums = append(nums, num)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// readLogFile reads one log file whole, refusing one larger than any log
// file the engine writes.
func readLogFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	if st.Size() > logFileMax {
		return nil, fmt.Errorf("reading the log: %s has %d bytes, more than any log file holds (%d)", path, st.Size(), logFileMax)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	return b, nil
}

// unflushedUnits counts the units held that no flushed generation
// covers: acked, not yet in a committed segment. A generation flushed in
// any partition is committed: its units are done.
func (v *logView) unflushedUnits() int {
	n := 0
	for part, have := range v.held {
		for seq := range have {
			if !v.covered(part, seq, true) {
				n++
			}
		}
	}
	return n
}

// covered reports whether a seal of partition part lists unit seq —
// only a flushed generation's seal if flushedOnly.
func (v *logView) covered(part uint32, seq uint64, flushedOnly bool) bool {
	for _, s := range v.seals {
		if s.part != part || flushedOnly && !v.flushed[s.id] {
			continue
		}
		for _, r := range s.ranges {
			if r.Lo <= seq && seq <= r.Hi {
				return true
			}
		}
	}
	return false
}

// dirty is what pins file f of partition part — its dirty map as the
// running log keeps it (docs/DESIGN.md §9.5): the generations with
// entries in it (their seal, or units their seal lists) not flushed, and
// how many of its units no seal lists yet (the memtable's when the log
// was read: acked, not yet sealed).
func (v *logView) dirty(part uint32, f logFile) (gens []wal.SnapshotRef, unsealed int) {
	for _, s := range v.seals {
		if s.part != part || v.flushed[s.id] || slices.Contains(gens, s.id) {
			continue
		}
		if s.file == f.Num || f.Units > 0 && overlaps(s.ranges, f.FirstSeq, f.LastSeq) {
			gens = append(gens, s.id)
		}
	}
	for seq := f.FirstSeq; f.Units > 0 && seq <= f.LastSeq; seq++ {
		if v.held[part][seq] && !v.covered(part, seq, false) {
			unsealed++
		}
	}
	return gens, unsealed
}

// overlaps reports whether a range of rs meets [lo, hi].
func overlaps(rs []wal.SeqRange, lo, hi uint64) bool {
	for _, r := range rs {
		if r.Lo <= hi && lo <= r.Hi {
			return true
		}
	}
	return false
}

// logReport is what the start-up owner check needs of the log.
type logReport struct {
	// Units: unit records whose sequence no seal covers, or covered only
	// by seals without a flushed record: acked, not yet in a segment.
	Units   int
	Damaged []string // partitions that could not be read whole, and why
	// Newest is the directory of the most recently sealed generation
	// ("{prefix}/{pipeline}/p_year=…/"), "" if none: who wrote the log.
	Newest string
}

// inspectLog reads the log under dataDir (readLog) and counts the units
// no flushed generation covers.
func inspectLog(dataDir string) (logReport, error) {
	v, err := readLog(dataDir)
	if err != nil {
		return logReport{}, err
	}
	r := logReport{Units: v.unflushedUnits(), Newest: v.newest}
	for _, p := range v.Partitions {
		if p.Halted != nil {
			r.Damaged = append(r.Damaged, fmt.Sprintf("partition %d: %v", p.Partition, p.Halted))
		}
	}
	return r, nil
}
