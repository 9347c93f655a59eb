package main

// DATA_DIR records its owner: the pipeline whose WAL it holds (the log
// under DATA_DIR/wal is not per pipeline), with the prefix and the store
// that pipeline's segments went to. Start-up reads the record before
// anything reads the WAL (in disk mode after taking wal.lock) and, when
// another pipeline — or this pipeline with another store — owned it,
// finds out read-only what that owner left unapplied (owner_inspect.go).
// Nothing left: the record is rewritten and the start goes on. Something
// left: the daemon refuses to start, naming both pipelines and what is
// left, unless SKIPPR_DRAIN_PIPELINE names the owner, in which case that
// pipeline's engine runs first, with this pipeline file's sinks and no
// sources, until it has applied everything (owner_drain.go).
//
// The record, DATA_DIR/pipeline, one "name value" a line:
//
//	skipprd-data-dir 1
//	pipeline <SKIPPR_PIPELINE>
//	prefix <SKIPPR_WAL_PREFIX>
//	wal_storage <disk|embedded|s3>
//	segments <local|embedded|s3://bucket>
//	sha256 <64 hex digits: SHA-256 of every byte before this line>
//
// It is written atomically (temp file, fsync, rename, directory fsync)
// and read with a bound; a damaged one is an error, never ignored.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	// ownerFile, under DATA_DIR, names the pipeline whose WAL it holds.
	ownerFile = "pipeline"
	// ownerFileMax bounds the read: the record is a few lines.
	ownerFileMax   = 4096
	ownerMagic     = "skipprd-data-dir"
	ownerVersion   = "1"
	segmentsLocal  = "local"
	segmentsEmbed  = "embedded"
	segmentsBucket = "s3://"
)

// envDrainPipeline names the pipeline whose WAL this start applies first
// (its committed segments and its log), when DATA_DIR's record names it.
const envDrainPipeline = "SKIPPR_DRAIN_PIPELINE"

// ownerRecord is DATA_DIR's record: who owns the WAL and where it is.
type ownerRecord struct {
	Pipeline   string
	Prefix     string
	WALStorage walStorage
	Segments   string // segmentsLocal, segmentsEmbed, or "s3://" + bucket
}

// recordOf is the record this configuration writes.
func recordOf(c config) ownerRecord {
	r := ownerRecord{Pipeline: c.Pipeline, Prefix: c.WALPrefix, WALStorage: c.WALStorage}
	switch {
	case c.localSegments():
		r.Segments = segmentsLocal
	case c.WALStorage == walEmbedded:
		r.Segments = segmentsEmbed
	default:
		r.Segments = segmentsBucket + c.Bucket
	}
	return r
}

// sameStore reports whether r and o keep their WAL in the same places.
func (r ownerRecord) sameStore(o ownerRecord) bool {
	return r.WALStorage == o.WALStorage && r.Segments == o.Segments
}

// name is the pipeline as messages name it: with its prefix when the
// prefix is not other's (so a changed SKIPPR_WAL_PREFIX reads as what it
// is).
func (r ownerRecord) name(other ownerRecord) string {
	if r.Prefix != other.Prefix {
		return fmt.Sprintf("%q (prefix %q)", r.Pipeline, r.Prefix)
	}
	return fmt.Sprintf("%q", r.Pipeline)
}

// storage says where r's WAL is, as an operator sets it.
func (r ownerRecord) storage() string {
	s := envWALStorage + "=" + string(r.WALStorage)
	if b, ok := strings.CutPrefix(r.Segments, segmentsBucket); ok {
		s += " " + envWALBucket + "=" + b
	}
	return s
}

func (r ownerRecord) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\npipeline %s\nprefix %s\nwal_storage %s\nsegments %s\n",
		ownerMagic, ownerVersion, r.Pipeline, r.Prefix, r.WALStorage, r.Segments)
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "sha256 %s\n", hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// errOwnerDamaged: DATA_DIR/pipeline cannot be read as a record.
var errOwnerDamaged = errors.New("damaged")

// parseOwner reads a record's bytes. Its errors wrap errOwnerDamaged and
// say what is wrong.
func parseOwner(b []byte) (ownerRecord, error) {
	bad := func(format string, args ...any) (ownerRecord, error) {
		return ownerRecord{}, fmt.Errorf("%w: %s", errOwnerDamaged, fmt.Sprintf(format, args...))
	}
	if len(b) == 0 {
		return bad("the file is empty")
	}
	if b[len(b)-1] != '\n' {
		return bad("the last line is cut short (no newline)")
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if magic, v, _ := strings.Cut(lines[0], " "); magic != ownerMagic {
		return bad("the first line is %q, want %q", clip(lines[0]), ownerMagic+" "+ownerVersion)
	} else if v != ownerVersion {
		return bad("version %q, and this build reads version %s (was it written by a newer skipprd?)", clip(v), ownerVersion)
	}
	keys := []string{"pipeline", "prefix", "wal_storage", "segments", "sha256"}
	if len(lines) != 1+len(keys) {
		return bad("%d lines, want %d", len(lines), 1+len(keys))
	}
	vals := make([]string, len(keys))
	for i, k := range keys {
		key, v, ok := strings.Cut(lines[1+i], " ")
		if !ok || key != k || v == "" {
			return bad("line %d is %q, want %q and a value", 2+i, clip(lines[1+i]), k)
		}
		vals[i] = v
	}
	body := b[:bytes.LastIndex(b[:len(b)-1], []byte("\n"))+1]
	sum := sha256.Sum256(body)
	if vals[4] != hex.EncodeToString(sum[:]) {
		return bad("its sha256 line does not match its content")
	}
	r := ownerRecord{Pipeline: vals[0], Prefix: vals[1], WALStorage: walStorage(vals[2]), Segments: vals[3]}
	if !validName(r.Pipeline) {
		return bad("pipeline %q is not a pipeline name", clip(r.Pipeline))
	}
	for _, p := range strings.Split(r.Prefix, "/") {
		if !validName(p) {
			return bad("prefix %q is not a key prefix", clip(r.Prefix))
		}
	}
	switch r.WALStorage {
	case walDisk, walEmbedded, walS3:
	default:
		return bad("wal_storage %q, want disk, embedded or s3", clip(vals[2]))
	}
	bucket, isBucket := strings.CutPrefix(r.Segments, segmentsBucket)
	switch {
	case r.Segments == segmentsLocal && r.WALStorage == walDisk:
	case r.Segments == segmentsEmbed && r.WALStorage == walEmbedded:
	case isBucket && bucket != "" && !strings.ContainsAny(bucket, " /") && r.WALStorage != walEmbedded:
	default:
		return bad("segments %q does not go with wal_storage %s", clip(r.Segments), r.WALStorage)
	}
	return r, nil
}

// clip shortens a damaged value for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// readOwner reads DATA_DIR's record at path; found is false when there is
// none. Any other failure is an error naming the file and what to do.
func readOwner(path string) (rec ownerRecord, found bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ownerRecord{}, false, nil
	}
	if err != nil {
		return ownerRecord{}, false, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, ownerFileMax+1))
	if err == nil && len(b) > ownerFileMax {
		err = fmt.Errorf("%w: larger than %d bytes, and the record is a few lines", errOwnerDamaged, ownerFileMax)
	}
	if err == nil {
		rec, err = parseOwner(b)
	}
	if err != nil {
		return ownerRecord{}, false, fmt.Errorf("%s: %w; the file names the pipeline whose WAL %s holds: restore it, "+
			"or remove it to have the owner inferred again from the segment store", path, err, envDataDir)
	}
	return rec, true, nil
}

// writeOwner replaces the record at path atomically and durably: a temp
// file beside it, fsynced, renamed over it, the directory fsynced.
func writeOwner(path string, r ownerRecord) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+ownerFile+"-*.tmp")
	if err != nil {
		return fmt.Errorf("recording the pipeline of %s: %w", envDataDir, err)
	}
	fail := func(err error) error {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("recording the pipeline of %s in %s: %w", envDataDir, path, err)
	}
	if _, err := tmp.Write(r.encode()); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("recording the pipeline of %s: %w", envDataDir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("recording the pipeline of %s: sync %s: %w", envDataDir, dir, err)
	}
	return nil
}
