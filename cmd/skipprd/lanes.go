package main

// Lanes: how large a sink's compaction jobs grow (engine.LaneLimits).
// The engine gathers a lane's PARTs — one sink, namespace, schema and
// CDC-ness — from consecutive committed segments into one job (one
// Parquet file, one Postgres transaction) and cuts it at the first
// segment after its Arrow payload reaches file_bytes or its oldest PART
// has waited flush_interval; file_bytes 0 makes a job per segment, as
// before jobs spanned segments.
//
// Each sink's two limits come, each on its own, from the first of:
//
//  1. the sink's file_bytes and flush_interval in the pipeline file;
//  2. for parquet-dir, parquet-s3 and iceberg sinks, SKIPPR_LAKE_FILE_BYTES and
//     SKIPPR_LAKE_FLUSH_INTERVAL (read at start-up, config.Lake);
//  3. the kind's default: 128 MiB and 5 minutes for the Parquet sinks
//     (files of a size readers like); file_bytes 0 for postgres (a small
//     transaction per segment, applied at once), and 5 minutes should
//     the file give it a file_bytes.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

const (
	envLakeFileBytes     = "SKIPPR_LAKE_FILE_BYTES"
	envLakeFlushInterval = "SKIPPR_LAKE_FLUSH_INTERVAL"
	defaultLakeFileBytes = 128 << 20
	defaultFlushInterval = 5 * time.Minute
)

// The bounds of file_bytes and flush_interval. A flush_interval of 0 is
// taken only where file_bytes is 0 (it is unused there); the variable
// takes no 0 (SKIPPR_LAKE_FILE_BYTES=0 is how to ask for a job per
// segment).
var (
	fileBytesRange = sizeRange{min: 1 << 20, max: 1 << 30, shown: "1MiB (1048576) .. 1GiB (1073741824)",
		example: "128MiB", zero: "a job per segment"}
	flushRange    = durationRange{min: time.Second, max: 24 * time.Hour, shown: "1s..24h", example: "5m or 30s", zero: true}
	flushVarRange = durationRange{min: time.Second, max: 24 * time.Hour, shown: "1s..24h", example: "5m or 30s"}
)

// laneKeys are the keys of every sink kind.
var laneKeys = []string{"file_bytes", "flush_interval"}

// laneSpec is what a sink's entry says of its lanes. A key it leaves
// out takes its value at start-up (pipelineFile.resolveLanes).
type laneSpec struct {
	FileBytes        int64
	FileBytesSet     bool
	FlushInterval    time.Duration
	FlushIntervalSet bool
	FlushLine        int // flush_interval's line when set
}

// lanes reads a sink's file_bytes and flush_interval.
func (c *checker) lanes(m *mapping) laneSpec {
	var l laneSpec
	l.FileBytes, l.FileBytesSet = c.size(m, "file_bytes", fileBytesRange, 0)
	l.FlushInterval, l.FlushIntervalSet = c.duration(m, "flush_interval", flushRange, 0)
	if l.FlushIntervalSet {
		l.FlushLine = m.vals["flush_interval"].Line
	}
	if l.FileBytesSet && l.FlushIntervalSet && l.FileBytes > 0 && l.FlushInterval == 0 {
		c.errorf(l.FlushLine, m.where, "%s", noInterval(fmt.Sprintf("file_bytes %d", l.FileBytes)))
	}
	return l
}

// noInterval says why flush_interval 0 cannot go with fileBytes (> 0,
// and where it comes from).
func noInterval(fileBytes string) string {
	return fmt.Sprintf("flush_interval 0 with %s: a lane that never fills its file would wait for ever; "+
		"want a duration in %s, or file_bytes: 0 for a job per segment", fileBytes, flushRange.shown)
}

// parseLakeLanes reads the Parquet sinks' limits from the environment
// into l, which holds the defaults.
func parseLakeLanes(get func(string) (string, bool), l *engine.LaneLimits) error {
	if v, ok := get(envLakeFileBytes); ok {
		n, err := fileBytesRange.parse(v)
		if err != nil {
			return &configError{envLakeFileBytes, v, err.Error()}
		}
		l.FileBytes = n
	}
	if v, ok := get(envLakeFlushInterval); ok {
		d, err := flushVarRange.parse(v)
		if err != nil {
			if d, perr := time.ParseDuration(v); perr == nil && d == 0 {
				err = fmt.Errorf("%w; for a job per segment set %s=0", err, envLakeFileBytes)
			}
			return &configError{envLakeFlushInterval, v, err.Error()}
		}
		l.FlushInterval = d
	}
	return nil
}

// lake reports whether s writes lake files (Parquet folders and
// buckets, Iceberg tables), which the SKIPPR_LAKE_*
// variables set.
func (s sinkSpec) lake() bool {
	return s.Kind == sinkParquetDir || s.Kind == sinkParquetS3 || s.Kind == sinkIceberg
}

// limits are s's lane limits, its entry's keys over defaults: lake for a
// Parquet sink, else the postgres default. A flush interval 0 the entry
// gives over a file_bytes it does not is an error (a *pipelineError).
// file_bytes 0 has no interval.
func (s sinkSpec) limits(path string, lake engine.LaneLimits) (engine.LaneLimits, error) {
	l, from := engine.LaneLimits{FlushInterval: defaultFlushInterval}, "the default of postgres sinks"
	if s.lake() {
		l, from = lake, fmt.Sprintf("the default of Parquet sinks, or %s", envLakeFileBytes)
	}
	if s.Lanes.FileBytesSet {
		l.FileBytes, from = s.Lanes.FileBytes, "this sink's file_bytes"
	}
	if s.Lanes.FlushIntervalSet {
		l.FlushInterval = s.Lanes.FlushInterval
	}
	if l.FileBytes > 0 && l.FlushInterval == 0 {
		return l, &pipelineError{Path: path, Line: s.Lanes.FlushLine, Where: fmt.Sprintf("sink %q", s.Name),
			Msg: noInterval(fmt.Sprintf("file_bytes %d (%s)", l.FileBytes, from))}
	}
	if l.FileBytes == 0 {
		l.FlushInterval = 0
	}
	return l, nil
}

// resolveLanes sets every sink's Limits, lake being the Parquet sinks'
// defaults (config.Lake). Errors are *pipelineError, joined.
func (p *pipelineFile) resolveLanes(lake engine.LaneLimits) error {
	var errs []error
	for i := range p.Sinks {
		l, err := p.Sinks[i].limits(p.Path, lake)
		if err != nil {
			errs = append(errs, err)
		}
		p.Sinks[i].Limits = l
	}
	return errors.Join(errs...)
}

// engineLanes are the sinks' limits by name, the engine's sink_ref
// (engine.Config.Lanes), once resolveLanes has run.
func (p *pipelineFile) engineLanes() map[string]engine.LaneLimits {
	out := make(map[string]engine.LaneLimits, len(p.Sinks))
	for _, s := range p.Sinks {
		out[s.Name] = s.Limits
	}
	return out
}

// laneAdjustments lists each SKIPPR_LAKE_* variable given that no sink
// takes: there is no Parquet sink, or each sets the key itself.
func (p *pipelineFile) laneAdjustments(getenv func(string) string) []adjusted {
	lakes, fileBytes, flush := 0, 0, 0 // Parquet sinks, and those that take each variable
	for _, s := range p.Sinks {
		if !s.lake() {
			continue
		}
		lakes++
		if !s.Lanes.FileBytesSet {
			fileBytes++
		}
		if !s.Lanes.FlushIntervalSet {
			flush++
		}
	}
	var out []adjusted
	for _, v := range []struct {
		name, key string
		takers    int
	}{{envLakeFileBytes, "file_bytes", fileBytes}, {envLakeFlushInterval, "flush_interval", flush}} {
		given := strings.TrimSpace(getenv(v.name))
		switch {
		case given == "" || v.takers > 0:
		case lakes == 0:
			out = append(out, adjusted{v.name, given, "ignored", "the pipeline has no parquet-dir, parquet-s3 or iceberg sink"})
		default:
			out = append(out, adjusted{v.name, given, "ignored", fmt.Sprintf("every parquet-dir, parquet-s3 and iceberg sink sets %s in the pipeline file, which wins", v.key)})
		}
	}
	return out
}

// laneAttrs are the log attributes of sink ref's lane limits in d's
// engine.
func (d *daemon) laneAttrs(ref string) []any {
	l, ok := d.ecfg.Lanes[ref]
	if !ok {
		l = d.ecfg.DefaultLanes
	}
	if l.FileBytes == 0 {
		return []any{"jobs", "one per segment", "file_bytes", 0}
	}
	return []any{"jobs", "span segments", "file_bytes", l.FileBytes, "flush_interval", l.FlushInterval}
}
