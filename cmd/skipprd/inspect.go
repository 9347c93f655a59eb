package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/skipprd/skipprd/engine"
)

const inspectAbout = `Reads a pipeline's write-ahead log without starting it, and prints:
the live segments in commit order with their PARTs (sink, namespace,
rows, bytes) and completion bitmaps (which slices are applied); the
committed source offsets; the idempotency-key store's size and window;
with WAL_STORAGE=disk, the log under DATA_DIR/wal — its partitions and
files, each with the generations not yet flushed that keep it
(dirty) — and the acked units not yet in a segment; the objects no
live segment accounts for (orphans) and the multipart uploads in
progress. It reads the segments where the daemon keeps them: the local
segment store (DATA_DIR/segments), the embedded store (DATA_DIR's bolt
file), or the bucket. The pipeline, DATA_DIR and WAL_STORAGE come from
the settings and the pipeline file, as skipprd run reads them.

"skipprd inspect segment ID" decodes one live segment: its commit
marker, its body verified against it (length, SHA-256, index), each
index entry, its offsets, cuts, bitmap and CDC sidecars.

It is read-only: it writes nothing, takes no lock (not DATA_DIR's
wal.lock), claims no writer object, and opens no source and no sink. A
running daemon is not disturbed; inspect shows what it has committed at
that moment (the embedded store is the exception: its file is locked by
the daemon, so inspect says so and exits 1). Every size read is bounded
by its format's limit.

Exit 0: printed. Exit 1: DATA_DIR missing, a store unreadable, or
damage found — a corrupt or missing object, a halted log partition —
each named (everything else is still printed). Exit 2: a wrong command
line or an invalid setting.

--json prints one JSON document instead, with these stable fields:
read_only, pipeline, wal_storage, data_dir, store, root, store_missing;
segments[]: id, marker, created_unix_ms, body_bytes, wal_id, pipeline,
applied, bitmap ("1" applied / "0" not, a character per part, ordinal
0 first), bitmap_object, offsets[] {key, value} (the sources'),
idempotency_keys (how many it commits), cuts[] {sink,
namespace, first, segments, parts, reason}, parts[] {ordinal, sink,
namespace, partition, rows, bytes, sidecar_bytes, applied};
offsets: checkpoint_epoch, checkpoint[], committed[] (the checkpoint
max-merged with the live segments': where a restart resumes);
idempotency_keys: buckets, runs, keys, bytes, oldest_unix_ms,
newest_unix_ms, window_seconds, bucket_seconds, legacy_buckets;
log (null unless disk): root, unflushed_units, partitions[]
{partition, halted, files[] {name, bytes, torn, units, first_seq,
last_seq, seals[], flushed[], dirty[], unsealed}}; orphans[] {key,
bytes, modified_unix_ms, why}; uploads[] {key, upload_id,
initiated_unix_ms}; problems[]. inspect segment ID --json: the
segment's fields above plus read_only, store, body, body_sha256,
index[] {ordinal, key, bucket_unix_ms, schema, arrow_start, arrow_len,
sidecar_start, sidecar_len, rows} and sidecars[] {ordinal, rows,
kinds}. Times are Unix milliseconds, sizes bytes.`

func inspectCommand(c *invocation) int {
	id, isSegment, ok := inspectArgs(c)
	if !ok {
		return exitUsage
	}
	cfg, code, ok := inspectConfig(c)
	if !ok {
		return code
	}
	log := newLogger(c.getenv(envLogFormat), c.stderr)
	if isSegment {
		doc, err := decodeSegment(c.ctx, cfg, id, log)
		if err != nil {
			fmt.Fprintf(c.stderr, "skipprd inspect segment: %v\n", err)
			return exitFail
		}
		return printInspect(c, doc, func(w io.Writer) { printSegmentDoc(w, doc) })
	}
	r, err := gatherReport(c.ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(c.stderr, "skipprd inspect: %v\n", err)
		return exitFail
	}
	code = printInspect(c, r, func(w io.Writer) { printReport(w, r) })
	if len(r.Problems) > 0 {
		fmt.Fprintf(c.stderr, "skipprd inspect: %d problem(s) found, each printed under \"problems\"\n", len(r.Problems))
		return exitFail
	}
	return code
}

// inspectArgs parses the positional arguments: none, or segment ID.
func inspectArgs(c *invocation) (id engine.SnapshotID, isSegment, ok bool) {
	switch {
	case len(c.args) == 0:
		return id, false, true
	case c.args[0] != "segment":
		fmt.Fprintf(c.stderr, "skipprd inspect: unknown argument %q (want none, or segment ID)\n", c.args[0])
		return id, false, false
	case len(c.args) != 2:
		fmt.Fprintf(c.stderr, "skipprd inspect segment: want one segment ID (as skipprd inspect lists them, like 000000000001-000000000004), got %d: %q\n", len(c.args)-1, c.args[1:])
		return id, true, false
	}
	id, ok = engine.ParseSnapshotID(c.args[1])
	if !ok {
		fmt.Fprintf(c.stderr, "skipprd inspect segment: %q is not a segment ID (want EPOCH-SEQ, 12 digits each, like 000000000001-000000000004)\n", c.args[1])
	}
	return id, true, ok
}

// inspectConfig reads the settings as skipprd run does (the pipeline
// file's data_dir and wal_storage under the environment's), and requires
// DATA_DIR to exist where the WAL lives in it: inspect never creates it.
func inspectConfig(c *invocation) (cfg config, code int, ok bool) {
	pf, err := pipelineOf(c.getenv)
	if err != nil {
		for _, p := range problems(err) {
			fmt.Fprintf(c.stderr, "skipprd inspect: %s\n", p)
		}
		return cfg, exitUsage, false
	}
	cfg, err = parseConfig(pf.applySettings(c.getenv))
	if err != nil {
		for _, p := range problems(err) {
			fmt.Fprintf(c.stderr, "skipprd inspect: %s\n", p)
		}
		return cfg, exitUsage, false
	}
	if cfg.WALStorage == walS3 {
		return cfg, exitOK, true // the WAL is in the bucket
	}
	st, err := os.Stat(cfg.DataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(c.stderr, "skipprd inspect: %s %s does not exist: no WAL to read (--data-dir names the daemon's)\n", envDataDir, cfg.DataDir)
		return cfg, exitFail, false
	case err != nil:
		fmt.Fprintf(c.stderr, "skipprd inspect: %s: %v\n", envDataDir, err)
		return cfg, exitFail, false
	case !st.IsDir():
		fmt.Fprintf(c.stderr, "skipprd inspect: %s %s is not a directory\n", envDataDir, cfg.DataDir)
		return cfg, exitFail, false
	}
	return cfg, exitOK, true
}

// printInspect prints doc as JSON, or as text with text.
func printInspect(c *invocation, doc any, text func(io.Writer)) int {
	if !c.asJSON {
		text(c.stdout)
		return exitOK
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintf(c.stderr, "skipprd inspect: writing JSON: %v\n", err)
		return exitFail
	}
	return exitOK
}
