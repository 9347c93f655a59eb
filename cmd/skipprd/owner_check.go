package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// errDrainStopped: a signal stopped the daemon while it drained another
// pipeline's WAL; what it had not applied yet is still there (run exits
// 0, as after any graceful stop).
var errDrainStopped = errors.New("stopped while draining")

// takeOwnership runs the start-up check of DATA_DIR's owner (owner.go)
// before anything reads the WAL: it reads the record, finds read-only
// what another owner left, refuses to start over it, or drains it when
// SKIPPR_DRAIN_PIPELINE says so, and records this pipeline.
func (d *daemon) takeOwnership(ctx context.Context, pf *pipelineFile, getenv func(string) string) error {
	cfg, log := d.cfg, d.log
	path := filepath.Join(cfg.DataDir, ownerFile)
	cur := recordOf(cfg)
	rec, found, err := readOwner(path)
	if err != nil {
		return err
	}
	inferred := false
	if !found {
		rec, inferred, err = d.inferOwner(ctx)
		if err != nil {
			return err
		}
		if !inferred {
			if cfg.DrainPipeline != "" {
				log.Warn("setting not used as given", "var", envDrainPipeline, "given", cfg.DrainPipeline, "used", "ignored",
					"why", fmt.Sprintf("%s has no record of another pipeline: there is nothing to drain", envDataDir))
			}
			log.Info("DATA_DIR: recording the pipeline that owns its WAL", "file", path, "pipeline", cur.Pipeline)
			return writeOwner(path, cur)
		}
		log.Info("DATA_DIR has no pipeline record (an older skipprd wrote it); inferred its owner from the segment store",
			"file", path, "owner", rec.Pipeline)
	}
	drain := cfg.DrainPipeline
	if rec == cur {
		if drain != "" {
			log.Warn("setting not used as given", "var", envDrainPipeline, "given", drain, "used", "ignored",
				"why", fmt.Sprintf("%s already belongs to pipeline %q: there is no other pipeline's WAL to drain", envDataDir, cur.Pipeline))
		}
		if inferred {
			return writeOwner(path, cur)
		}
		return nil
	}
	left, err := leftBy(ctx, cfg, rec, log)
	if err != nil {
		return fmt.Errorf("checking what pipeline %s left in %s %s: %w", rec.name(cur), envDataDir, cfg.DataDir, err)
	}
	moved := rec.Pipeline != cur.Pipeline || rec.Prefix != cur.Prefix
	if left.empty() {
		if moved {
			log.Info("DATA_DIR changes pipeline: the old one left nothing unapplied", "data_dir", cfg.DataDir,
				"old", rec.Pipeline, "old_prefix", rec.Prefix, "new", cur.Pipeline, "new_prefix", cur.Prefix)
		} else {
			log.Info("DATA_DIR's WAL moves: the old one holds nothing unapplied", "data_dir", cfg.DataDir,
				"pipeline", cur.Pipeline, "old", rec.storage(), "new", cur.storage())
		}
		if drain != "" && drain != rec.Pipeline {
			log.Warn("setting not used as given", "var", envDrainPipeline, "given", drain, "used", "ignored",
				"why", fmt.Sprintf("%s belonged to pipeline %q, which left nothing to drain", envDataDir, rec.Pipeline))
		}
		return writeOwner(path, cur)
	}
	if !rec.sameStore(cur) {
		return fmt.Errorf("%s %s holds the WAL of pipeline %s in %s, which still holds %s; this start (pipeline %s, %s) would abandon it. "+
			"Start pipeline %q again with %s (SIGINT or SIGTERM stops it once it has applied everything), then change the settings",
			envDataDir, cfg.DataDir, rec.name(cur), rec.storage(), left, cur.name(rec), cur.storage(), rec.Pipeline, rec.storage())
	}
	switch drain {
	case "":
		return fmt.Errorf("%s %s holds the unapplied WAL of pipeline %s: %s; starting pipeline %s here would abandon it. "+
			"Either start pipeline %q again (%s=%s), or set %s=%s to apply pipeline %q's WAL to this pipeline file's sinks first, then start %s",
			envDataDir, cfg.DataDir, rec.name(cur), left, cur.name(rec),
			rec.Pipeline, envPipeline, rec.Pipeline, envDrainPipeline, rec.Pipeline, rec.Pipeline, cur.name(rec))
	case rec.Pipeline:
	default:
		return fmt.Errorf("%s=%s, but %s %s holds the unapplied WAL of pipeline %s, not of %q (%s); "+
			"set %s=%s to drain it, or start pipeline %q again",
			envDrainPipeline, drain, envDataDir, cfg.DataDir, rec.name(cur), drain, left, envDrainPipeline, rec.Pipeline, rec.Pipeline)
	}
	log.Info("draining the WAL of the pipeline that owned DATA_DIR before this one starts", "data_dir", cfg.DataDir,
		"old", rec.Pipeline, "new", cur.Pipeline, "left", left.String())
	if err := d.drainOwner(ctx, rec, pf, getenv); err != nil {
		return err
	}
	after, err := leftBy(ctx, cfg, rec, log)
	if err != nil {
		return fmt.Errorf("checking what pipeline %s left after draining it: %w", rec.name(cur), err)
	}
	if !after.empty() {
		return fmt.Errorf("drained pipeline %s, yet it still holds %s", rec.name(cur), after)
	}
	log.Info("drained: the old pipeline's WAL is applied; DATA_DIR now belongs to this pipeline", "old", rec.Pipeline, "new", cur.Pipeline)
	return writeOwner(path, cur)
}

// inferOwner names the owner of a DATA_DIR that has no record (written
// by a build older than the record, or never started): the pipeline whose
// writer object the local segment store or the embedded store wrote last
// (every start rewrites it), else, in disk-WAL mode, the pipeline of the
// log's newest seal. A bucket tells nothing: pipelines share one
// legitimately, and a writer elsewhere cannot be told from an abandoned
// one. found is false when nothing names an owner.
func (d *daemon) inferOwner(ctx context.Context) (rec ownerRecord, found bool, err error) {
	cfg := d.cfg
	rec = recordOf(cfg)
	if rec.Segments == segmentsLocal || rec.Segments == segmentsEmbed {
		v, ok, err := openStoreView(ctx, cfg, rec.Segments, d.log)
		if err != nil {
			return rec, false, fmt.Errorf("inferring the owner of %s %s: %w", envDataDir, cfg.DataDir, err)
		}
		if ok {
			w, err := v.writers(ctx, cfg.WALPrefix)
			v.close()
			if err != nil {
				return rec, false, fmt.Errorf("inferring the owner of %s %s: %w", envDataDir, cfg.DataDir, err)
			}
			if len(w) > 0 {
				names := make([]string, 0, len(w))
				for n := range w {
					names = append(names, n)
				}
				slices.SortFunc(names, func(a, b string) int {
					if c := cmp.Compare(w[b], w[a]); c != 0 {
						return c // newest first
					}
					return strings.Compare(a, b)
				})
				if len(names) > 1 {
					d.log.Warn("the segment store holds several pipelines; taking the one that started last as DATA_DIR's owner",
						"pipelines", strings.Join(names, ","), "owner", names[0])
				}
				rec.Pipeline = names[0]
				return rec, true, nil
			}
		}
	}
	if cfg.WALStorage == walDisk {
		lr, err := inspectLog(cfg.DataDir)
		if err != nil {
			return rec, false, fmt.Errorf("inferring the owner of %s %s: %w", envDataDir, cfg.DataDir, err)
		}
		if p := pipelineOfDir(cfg.WALPrefix, lr.Newest); p != "" {
			rec.Pipeline = p
			return rec, true, nil
		}
		if lr.Units > 0 {
			d.log.Warn("DATA_DIR has no pipeline record and its log holds units of no sealed generation: "+
				"nothing tells whose they are, so they are taken as this pipeline's", "units", lr.Units, "pipeline", cfg.Pipeline)
		}
	}
	return rec, false, nil
}
