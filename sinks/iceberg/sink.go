package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sinks"
)

// Config is one Iceberg sink: where its tables live and what it may use.
type Config struct {
	// Catalog holds the tables' metadata (catalog.go).
	Catalog Catalog
	// Namespace is the Iceberg namespace the tables go in; each skipprd
	// namespace is a table of that name in it.
	Namespace string
	// Spec partitions every table this sink creates; zero: by the day of
	// _ingested_at, the ingest time.
	Spec PartitionSpec
	// SinkRef is the sink's name in the pipeline: it names the sink's
	// high-water marks (lookup.go).
	SinkRef string
	// TableProps are set on every table this sink creates.
	TableProps map[string]string
	// Files writes the data files under the warehouse (files.go).
	Files Files
	// Retention is what expiry keeps; KeepLast 0 takes RetentionDefault.
	Retention Retention
	// SmallFiles is when small files are rewritten (rewrite.go); zero
	// fields take SmallFilesDefault's.
	SmallFiles SmallFiles
	Blocking   engine.Blocking
	Exec       engine.Executor
	Clock      engine.Clock
}

// PartitionDefault is the partition column of a sink without one: the
// ingest time, which the sink adds to every row.
const PartitionDefault = "_ingested_at"

// RetentionDefault keeps a table's newest 100 snapshots: time travel
// over the last 100 commits, and metadata bounded by it whatever the
// commit rate (an age-based rule alone is not).
var RetentionDefault = Retention{KeepLast: 100}

// ExpireSlack is how far past Retention.KeepLast the snapshots grow
// before an expiry runs: one expiry per ExpireSlack commits, not one per
// commit, since each rewrites the table's metadata.
const ExpireSlack = 20

// Sink applies jobs to Iceberg tables: one table per namespace, one
// snapshot per job (the protocol in commit.go).
type Sink struct {
	cfg   Config
	stats stats
	// commits counts this sink's commits to each table since its last
	// look for small files (rewriteDue); unmergeable, per table, the id
	// of the last plan found not to merge (rewrite.go). On the loop only.
	commits     map[Ident]int
	unmergeable map[Ident]string
}

var _ engine.Sink = (*Sink)(nil)

// NewSink returns a sink for cfg. REQUIRES: every port and the Catalog
// and Files are set, Namespace is not empty.
func NewSink(cfg Config) *Sink {
	if cfg.Catalog == nil || cfg.Files == nil || cfg.Blocking == nil || cfg.Exec == nil || cfg.Clock == nil || cfg.Namespace == "" {
		panic(fmt.Sprintf("iceberg: NewSink with a missing part: %+v", cfg))
	}
	if cfg.Spec.SourceColumn == "" {
		cfg.Spec.SourceColumn = PartitionDefault
	}
	if cfg.Retention.KeepLast == 0 {
		cfg.Retention = RetentionDefault
	}
	cfg.SmallFiles = cfg.SmallFiles.withDefaults()
	return &Sink{cfg: cfg, commits: map[Ident]int{}, unmergeable: map[Ident]string{}}
}

// Ident is the table a namespace's rows go to.
func (s *Sink) Ident(namespace string) Ident {
	return Ident{Namespace: s.cfg.Namespace, Name: namespace}
}

// apply is one Apply's state; its methods are the steps, each started
// from the previous one's callback on the loop.
type apply struct {
	s     *Sink
	job   *engine.Job
	id    Ident
	file  *arrow.Schema
	table *Table
	files []EncodedFile
	done  func(error)
}

// Apply implements engine.Sink: prepare the table (Blocking), encode the
// job's files (Executor), write each once (Files), commit (Blocking).
func (s *Sink) Apply(job *engine.Job, done func(err error)) {
	if job == nil || done == nil {
		panic("iceberg: Apply with a nil job or callback")
	}
	a := &apply{s: s, job: job, id: s.Ident(job.Namespace), done: done}
	file, err := sinks.FileSchema(job)
	if err != nil {
		a.fail(err)
		return
	}
	a.file = file
	a.prepare()
}

func (a *apply) prepare() {
	var p prepared
	a.s.cfg.Blocking.Do(func(ctx context.Context) (err error) {
		p, err = a.s.prepare(ctx, a.id, a.file, a.job)
		return err
	}, func(err error) {
		if err != nil {
			a.finish(err)
			return
		}
		if p.found != notFound {
			a.s.stats.noteFound(p.found)
			a.finish(nil)
			return
		}
		a.table = p.table
		a.encode()
	})
}

func (a *apply) encode() {
	var err error
	a.s.cfg.Exec.Go(func() {
		a.files, err = EncodeFiles(a.job, a.table.Schema, a.table.Spec, a.job.SegmentCreatedUnixMs)
	}, func() {
		if err != nil {
			a.finish(err)
			return
		}
		if len(a.files) == 0 {
			// A job without rows: nothing to add, and a replay adds
			// nothing either, so no snapshot records it.
			a.finish(nil)
			return
		}
		a.write(0, make([]DataFile, 0, len(a.files)))
	})
}

// write puts the files from i on, then commits them.
func (a *apply) write(i int, written []DataFile) {
	if i == len(a.files) {
		a.files = nil // the bodies are written; let them go
		a.commit(written)
		return
	}
	f := a.files[i]
	rel, err := dataPath(a.table, a.s.cfg.Files.Base(), f.Day, a.job.ID)
	if err != nil {
		a.finish(err)
		return
	}
	body := f.Body
	a.s.cfg.Files.Write(a.job, rel, func() ([]byte, error) { return body, nil }, func(size int64, err error) {
		if err != nil {
			a.finish(err)
			return
		}
		df := DataFile{Path: strings.TrimSuffix(a.s.cfg.Files.Base(), "/") + "/" + rel, Rows: f.Rows, Bytes: size, Day: f.Day, Columns: f.Columns}
		a.write(i+1, append(written, df))
	})
}

func (a *apply) commit(files []DataFile) {
	nowMs := a.s.cfg.Clock.WallUnixMs()
	a.s.cfg.Blocking.Do(func(ctx context.Context) error {
		if err := a.s.commit(ctx, a.table, a.job, files); err != nil {
			return err
		}
		// The table prepare read, plus this commit: an expiry is due
		// only past the slack, so most commits skip the extra load.
		// (Another writer's snapshots since are counted by the next
		// commit's prepare.)
		if len(a.table.Snapshots)+1 > a.s.cfg.Retention.KeepLast+ExpireSlack {
			a.s.maintain(ctx, a.id, nowMs)
		}
		return nil
	}, func(err error) {
		if err == nil && a.s.rewriteDue(a.id) {
			a.s.rewriteSmall(a.id, func() { a.finish(nil) })
			return
		}
		a.finish(err)
	})
}

// maintain expires a table's old snapshots once they are ExpireSlack
// past the retention. Its failures are counted, never the job's: the
// job is committed, and the next commit tries again.
func (s *Sink) maintain(ctx context.Context, id Ident, nowMs int64) {
	t, err := s.cfg.Catalog.Load(ctx, id)
	if err != nil {
		s.stats.maintainSkipped.Add(1)
		return
	}
	if len(t.Snapshots) <= s.cfg.Retention.KeepLast+ExpireSlack {
		return
	}
	r := s.cfg.Retention
	r.NowMs = nowMs
	if err := s.cfg.Catalog.Expire(ctx, t, r); err != nil {
		s.stats.expireFailed.Add(1)
		return
	}
	s.stats.expired.Add(1)
}

func (a *apply) fail(err error) { a.s.cfg.Exec.Go(func() {}, func() { a.finish(err) }) }

// finish answers the Apply, naming the job and the table.
func (a *apply) finish(err error) {
	if err != nil {
		if errors.Is(err, engine.ErrCannotApply) {
			a.s.stats.refused.Add(1)
		}
		err = fmt.Errorf("iceberg: apply job %s (namespace %q) to table %s: %w", a.job.ID, a.job.Namespace, a.id, err)
	}
	a.done(err)
}

// dataPath is where a job's file of one partition day goes, relative to
// the warehouse base: {table}/data/{field}={YYYY-MM-DD}/{job ID}.parquet.
// A pure function of the table and the job, so a replay writes the same
// file (and finds it, judged by its footer, if an earlier attempt did).
func dataPath(t *Table, base string, day int32, jobID string) (string, error) {
	base = strings.TrimSuffix(base, "/") + "/"
	rel, ok := strings.CutPrefix(t.Location, base)
	if !ok || rel == "" {
		return "", fmt.Errorf("iceberg: table %s is at %s, outside the warehouse %s this sink writes: %w", t.Ident, t.Location, base, engine.ErrCannotApply)
	}
	date := time.Unix(int64(day)*86400, 0).UTC().Format("2006-01-02")
	return fmt.Sprintf("%s/data/%s=%s/%s.parquet", strings.TrimSuffix(rel, "/"), t.Spec.FieldName(), date, jobID), nil
}

// Stats are the sink's counts of what its protocol met.
type Stats struct {
	Committed       int64 // snapshots committed
	Created         int64 // tables created
	Evolutions      int64 // schema changes committed (or raced)
	FoundSnapshot   int64 // jobs found applied in a snapshot's summary before writing
	FoundWatermark  int64 // jobs found applied by their log's high-water mark
	Conflicts       int64 // commits rebased on another writer's snapshot
	ConflictLanded  int64 // a conflict whose job was in the table: an earlier attempt landed
	AmbiguousLanded int64 // a failed commit found landed
	AmbiguousLost   int64 // a failed commit found not landed
	LookupFailed    int64 // a failed commit whose look failed too
	Refused         int64 // jobs refused (engine.ErrCannotApply)
	Expired         int64 // expiries committed
	ExpireFailed    int64 // expiries that failed (the next commit tries again)
	MaintainSkipped int64 // commits after which the table could not be read to maintain it
	// Small-file rewrites (rewrite.go):
	Rewritten        int64 // committed (or found landed)
	RewriteLanded    int64 // a failed commit found landed
	RewriteConflicts int64 // commits rebased on another writer's snapshot
	RewriteAbandoned int64 // another writer replaced the inputs first
	RewriteFailed    int64 // failed (a read, the merge, the write, the commit): planned again later
	RewriteSplit     int64 // plans whose inputs wrote a column as two types: one schema group merged
}

type stats struct {
	committed, created, evolutions, foundSnapshot, foundWatermark atomic.Int64
	conflicts, conflictLanded, ambiguousLanded, ambiguousLost     atomic.Int64
	lookupFailed, refused, expired, expireFailed, maintainSkipped atomic.Int64
	rewritten, rewriteLanded, rewriteConflicts, rewriteAbandoned  atomic.Int64
	rewriteFailed, rewriteSplit                                   atomic.Int64
}

func (s *stats) noteFound(f found) {
	if f == byWatermark {
		s.foundWatermark.Add(1)
		return
	}
	s.foundSnapshot.Add(1)
}

// Stats returns the sink's counts.
func (s *Sink) Stats() Stats {
	x := &s.stats
	return Stats{Committed: x.committed.Load(), Created: x.created.Load(), Evolutions: x.evolutions.Load(),
		FoundSnapshot: x.foundSnapshot.Load(), FoundWatermark: x.foundWatermark.Load(), Conflicts: x.conflicts.Load(),
		ConflictLanded: x.conflictLanded.Load(), AmbiguousLanded: x.ambiguousLanded.Load(), AmbiguousLost: x.ambiguousLost.Load(),
		LookupFailed: x.lookupFailed.Load(), Refused: x.refused.Load(), Expired: x.expired.Load(), ExpireFailed: x.expireFailed.Load(),
		MaintainSkipped: x.maintainSkipped.Load(), Rewritten: x.rewritten.Load(), RewriteLanded: x.rewriteLanded.Load(),
		RewriteConflicts: x.rewriteConflicts.Load(), RewriteAbandoned: x.rewriteAbandoned.Load(), RewriteFailed: x.rewriteFailed.Load(),
		RewriteSplit: x.rewriteSplit.Load()}
}
