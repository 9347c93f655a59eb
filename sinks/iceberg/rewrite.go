package iceberg

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// The small-file rewrite. A valve that cuts a job early, or a quiet lane
// that cuts one at its max delay, leaves files far below the lake's file
// size; a reader pays per file. So now and then — after every
// SmallFiles.Every commits of this sink to a table — the sink looks at
// the table's current files and, in the oldest partition (day) holding
// SmallFiles.MinFiles or more files under SmallFiles.SmallBytes of one
// tier (planSmall), rewrites them into one: the files sorted by path,
// taken while their bytes stay within SmallFiles.MaxBytes.
//
// The rewrite is an exactly-once commit of its own:
//
//	plan     Load, Files (Blocking); the inputs as above
//	read     each input through Files.Read — twice, the reads compared,
//	         so a read damaged on the way never becomes the table's rows
//	merge    (Executor) the inputs' rows in input order into one file of
//	         every column any of them has, in the table's types (nulls
//	         where a file lacks one; merge.go) — or, where two would
//	         write a column as different types (structs of different
//	         fields), the inputs of one schema only; its id is a hash
//	         of the table and the inputs' paths, its name
//	         {table}/data/{field}={day}/rewrite-{tier}-{id}.parquet, its
//	         footer's skipprd.content the id: a pure function of the
//	         inputs, so a retry writes (and finds) the same file
//	write    Files.Write, create-only, as a job's file
//	commit   Rewrite (Blocking), pinned to the snapshot planned on, with
//	         skipprd.rewrite-id and skipprd.rewrite-files in its summary
//
// After a failed commit the sink loads the table and looks: the merged
// file live and no input ⇒ it landed; every input live and the merged
// file not ⇒ it did not, and a conflict rebases onto the new snapshot
// (another writer's append leaves the inputs alone); anything else —
// another writer rewrote some inputs first — abandons it. So the inputs'
// rows are in the table exactly once whatever happens: the replace is
// atomic, it is only ever built on a snapshot holding every input, and
// it can land only once, for its inputs are gone after it.
//
// A rewrite never fails the job whose Apply ran it: the job is committed
// by then, and a rewrite that fails is counted and planned again later.
// A crash after the merged file is written and before its commit leaves
// the file unlisted; the next plan of the same inputs writes the same
// name and finds it. The replaced files stay in storage (data files are
// never deleted by this sink: another writer's reader may be planning on
// a snapshot that lists them).

// SmallFiles is when and how the sink rewrites a partition's small files
// into one.
type SmallFiles struct {
	// Every: a table is looked at after every Every commits of this sink
	// to it. 0: twice MinFiles (by a look, MinFiles files may have come
	// since the last); negative: never.
	Every int
	// MinFiles: a partition is rewritten once it holds this many small
	// files (at least 2).
	MinFiles int
	// SmallBytes: a file under this size is small.
	SmallBytes int64
	// MaxBytes bounds one rewrite's input bytes, so its memory: one
	// input file's rows are decoded at a time, every input's bytes held.
	MaxBytes int64
}

// SmallFilesDefault: look every 16 commits; rewrite a day's files once
// 8 are under 32 MiB, at most 128 MiB of them at once.
var SmallFilesDefault = SmallFiles{Every: 16, MinFiles: 8, SmallBytes: 32 << 20, MaxBytes: 128 << 20}

// Summary keys of a rewrite's snapshot.
const (
	SummaryRewriteID    = "skipprd.rewrite-id"
	SummaryRewriteFiles = "skipprd.rewrite-files"
)

// withDefaults fills the zero fields of p from SmallFilesDefault (Every
// from MinFiles).
func (p SmallFiles) withDefaults() SmallFiles {
	d := SmallFilesDefault
	if p.MinFiles < 2 {
		p.MinFiles = d.MinFiles
	}
	if p.Every == 0 {
		p.Every = 2 * p.MinFiles
	}
	if p.SmallBytes <= 0 {
		p.SmallBytes = d.SmallBytes
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = d.MaxBytes
	}
	return p
}

// rewriteDue counts a commit of this sink to id and says whether the
// table is due a look. On the loop only (Apply's callbacks).
func (s *Sink) rewriteDue(id Ident) bool {
	if s.cfg.SmallFiles.Every < 0 {
		return false
	}
	s.commits[id]++
	if s.commits[id] < s.cfg.SmallFiles.Every {
		return false
	}
	s.commits[id] = 0
	return true
}

// planSmall picks the inputs of a rewrite of t's files: in the oldest
// day where some tier holds MinFiles or more small files under t's data
// folder, the highest such tier's, sorted by path and taken while within
// MaxBytes; and the tier of the file they make. Nil: nothing to rewrite.
// (The highest: a look rewrites one group, and the lowest tier, which
// every commit feeds, would be due at every look and starve the rest.)
//
// Tiers keep a trickle cheap: a job's file is tier 0, a rewrite of tier
// k files is tier k+1 (its name says so), and only files of one tier
// are merged. Without them each rewrite would take the last one's file
// in again, and a row would be rewritten once per look until its file
// grew past SmallBytes; with them a row is rewritten once per tier, a
// logarithm of the day's files (base MinFiles).
func planSmall(t *Table, files []DataFile, p SmallFiles) ([]DataFile, int) {
	under := strings.TrimSuffix(t.Location, "/") + "/data/"
	type key struct {
		day  int32
		tier int
	}
	groups := map[key][]DataFile{}
	var keys []key
	for _, f := range files {
		if f.Bytes >= p.SmallBytes || !strings.HasPrefix(f.Path, under) {
			continue
		}
		k := key{f.Day, tierOf(f.Path)}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], f)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.day, b.day), cmp.Compare(b.tier, a.tier)) })
	for _, k := range keys {
		small := groups[k]
		if len(small) < p.MinFiles {
			continue
		}
		slices.SortFunc(small, func(a, b DataFile) int { return strings.Compare(a.Path, b.Path) })
		var bytes int64
		n := 0
		for n < len(small) && bytes+small[n].Bytes <= p.MaxBytes {
			bytes += small[n].Bytes
			n++
		}
		if n >= 2 {
			return small[:n], k.tier + 1
		}
	}
	return nil, 0
}

// rewritePrefix starts the name of a rewrite's file: rewrite-{tier}-{id}.
const rewritePrefix = "rewrite-"

// rewriteName is the stem of the file of rewrite id at tier.
func rewriteName(tier int, id string) string { return fmt.Sprintf("%s%d-%s", rewritePrefix, tier, id) }

// tierOf is the tier of the data file at path: a rewrite's, by its
// name; any other file's (a job's) is 0.
func tierOf(path string) int {
	name := path[strings.LastIndexByte(path, '/')+1:]
	rest, ok := strings.CutPrefix(name, rewritePrefix)
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, "-")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || n < 1 {
		return 0
	}
	return n
}

// rewriteID names a rewrite of inputs in table id: a hash of both.
func rewriteID(id Ident, inputs []DataFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", id)
	for _, f := range inputs {
		fmt.Fprintf(h, "%s\n", f.Path)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// rewrite is one rewrite's state; its methods are the steps, each
// started from the previous one's callback on the loop.
type rewrite struct {
	s      *Sink
	id     Ident
	t      *Table
	inputs []DataFile
	tier   int // of the merged file
	bodies [][]byte
	done   func()
}

// rewriteSmall runs one rewrite of table id's small files, if any are
// due one, then calls done (whatever happened: the outcome is counted).
func (s *Sink) rewriteSmall(id Ident, done func()) {
	r := &rewrite{s: s, id: id, done: done}
	s.cfg.Blocking.Do(func(ctx context.Context) error {
		t, err := s.cfg.Catalog.Load(ctx, id)
		if err != nil {
			return err
		}
		files, err := s.cfg.Catalog.Files(ctx, t)
		if err != nil {
			return err
		}
		r.t = t
		r.inputs, r.tier = planSmall(t, files, s.cfg.SmallFiles)
		return nil
	}, func(err error) {
		switch {
		case err != nil:
			r.give(&s.stats.rewriteFailed)
		case r.inputs == nil || s.unmergeable[id] == rewriteID(id, r.inputs):
			r.done() // nothing due, or what is due cannot be merged
		default:
			r.read(0)
		}
	})
}

// read reads the inputs from i on, then merges them.
func (r *rewrite) read(i int) {
	if i == len(r.inputs) {
		r.merge()
		return
	}
	f := r.inputs[i]
	r.s.cfg.Files.Read(f.Path, f.Bytes, func(b []byte, err error) {
		if err != nil {
			r.give(&r.s.stats.rewriteFailed)
			return
		}
		r.bodies = append(r.bodies, b)
		r.read(i + 1)
	})
}

func (r *rewrite) merge() {
	var m merged
	var err error
	r.s.cfg.Exec.Go(func() {
		m, err = mergeFiles(r.id, r.t.Schema, r.inputs, r.bodies)
	}, func() {
		r.bodies = nil
		if err == nil && len(m.inputs) < len(r.inputs) {
			r.s.stats.rewriteSplit.Add(1)
		}
		if err != nil || len(m.inputs) < 2 {
			// The same bytes merge the same way: not again until the
			// plan changes (a file more, or one rewritten).
			r.s.unmergeable[r.id] = rewriteID(r.id, r.inputs)
		}
		switch {
		case err != nil:
			r.give(&r.s.stats.rewriteFailed)
		case len(m.inputs) < 2:
			r.done()
		default:
			r.write(m)
		}
	})
}

func (r *rewrite) write(m merged) {
	name := rewriteName(r.tier, m.id)
	rel, err := dataPath(r.t, r.s.cfg.Files.Base(), m.file.Day, name)
	if err != nil {
		r.give(&r.s.stats.rewriteFailed)
		return
	}
	job := &engine.Job{ID: name, Namespace: r.id.Name, Content: m.id}
	body := m.file.Body
	m.file.Body = nil
	r.s.cfg.Files.Write(job, rel, func() ([]byte, error) { return body, nil }, func(size int64, err error) {
		if err != nil {
			r.give(&r.s.stats.rewriteFailed)
			return
		}
		add := DataFile{Path: strings.TrimSuffix(r.s.cfg.Files.Base(), "/") + "/" + rel, Rows: m.file.Rows, Bytes: size,
			Day: m.file.Day, Columns: m.file.Columns}
		r.commit(Rewrite{Remove: m.inputs, Add: add,
			Summary: map[string]string{SummaryRewriteID: m.id, SummaryRewriteFiles: fmt.Sprint(len(m.inputs))}})
	})
}

func (r *rewrite) commit(rw Rewrite) {
	nowMs := r.s.cfg.Clock.WallUnixMs()
	r.s.cfg.Blocking.Do(func(ctx context.Context) error {
		t, err := r.s.commitRewrite(ctx, r.t, rw)
		if err == nil && len(t.Snapshots)+1 > r.s.cfg.Retention.KeepLast+ExpireSlack {
			r.s.maintain(ctx, r.id, nowMs)
		}
		return err
	}, func(error) { r.done() })
}

// give counts a rewrite given up on and answers.
func (r *rewrite) give(counter interface{ Add(int64) int64 }) {
	counter.Add(1)
	r.done()
}

// commitRewrite commits rw on t exactly once (the protocol above) and
// returns the table it was committed on. Every outcome is counted.
func (s *Sink) commitRewrite(ctx context.Context, t *Table, rw Rewrite) (*Table, error) {
	for range conflictsMax {
		err := s.cfg.Catalog.Rewrite(ctx, t, rw)
		if err == nil {
			s.stats.rewritten.Add(1)
			return t, nil
		}
		now, st, lerr := s.lookRewrite(ctx, t.Ident, rw)
		switch {
		case lerr != nil:
			s.stats.rewriteFailed.Add(1)
			return nil, fmt.Errorf("iceberg: rewrite in table %s: %w; then looking: %w", t.Ident, err, lerr)
		case st == rewriteLanded:
			s.stats.rewritten.Add(1)
			s.stats.rewriteLanded.Add(1)
			return now, nil
		case st == rewriteGone:
			s.stats.rewriteAbandoned.Add(1)
			return nil, fmt.Errorf("iceberg: rewrite in table %s: %w; another writer replaced its files", t.Ident, err)
		case !errors.Is(err, ErrConflict):
			s.stats.rewriteFailed.Add(1)
			return nil, fmt.Errorf("iceberg: rewrite in table %s: %w (looked: not in the table)", t.Ident, err)
		}
		s.stats.rewriteConflicts.Add(1)
		t = now
	}
	s.stats.rewriteFailed.Add(1)
	return nil, fmt.Errorf("iceberg: rewrite in table %s: it moved %d times in a row: %w", t.Ident, conflictsMax, ErrConflict)
}

// rewriteState is what a look at a table says of a rewrite.
type rewriteState uint8

const (
	rewriteNot    rewriteState = iota // every input live, the merged file not
	rewriteLanded                     // the merged file live, no input
	rewriteGone                       // anything else: someone else's rewrite
)

// lookRewrite loads table id and says where rw stands in it.
func (s *Sink) lookRewrite(ctx context.Context, id Ident, rw Rewrite) (*Table, rewriteState, error) {
	now, err := s.cfg.Catalog.Load(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	files, err := s.cfg.Catalog.Files(ctx, now)
	if err != nil {
		return nil, 0, err
	}
	live := make(map[string]bool, len(files))
	for _, f := range files {
		live[f.Path] = true
	}
	inputs := 0
	for _, f := range rw.Remove {
		if live[f.Path] {
			inputs++
		}
	}
	switch {
	case live[rw.Add.Path] && inputs == 0:
		return now, rewriteLanded, nil
	case !live[rw.Add.Path] && inputs == len(rw.Remove):
		return now, rewriteNot, nil
	}
	return now, rewriteGone, nil
}
