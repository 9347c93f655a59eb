package sinks

import (
	"fmt"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Where a job's Parquet file goes. The layout is Hive-style so that
// Spark, Trino, DuckDB and friends discover the date partitions:
//
//	{prefix}/{namespace}/p_year=YYYY/p_month=MM/p_day=DD/{job.ID}.parquet
//
// The date is the creation time (Job.SegmentCreatedUnixMs) of the
// segment whose cut ends the job — for a job that spans segments, its
// last — in UTC, so a replayed job — same cut, same ID — lands on the
// same key;
// the wall clock at apply time must never enter the name, or a retry after
// midnight would write the rows a second time under another day.

// parquetSuffix ends every final file name.
const parquetSuffix = ".parquet"

// tempPrefix starts ParquetDir's temporary file names. Hive-style readers
// skip names starting with "." or "_", so a leftover temp file is never
// read as data.
const tempPrefix = "."

// ObjectKey is the Hive-style key of job's file under prefix. prefix may
// be empty; leading and trailing slashes of prefix are dropped, so the key
// never starts with a slash. Namespace and ID are escaped (see
// pathSegment), so each stays one path segment whatever it holds.
// REQUIRES: job.Namespace and job.ID are not empty.
func ObjectKey(prefix string, job *engine.Job) string {
	rel := jobDir(job) + "/" + fileName(job)
	if p := strings.Trim(prefix, "/"); p != "" {
		return p + "/" + rel
	}
	return rel
}

// jobDir is the folder of job's file relative to the prefix:
// {namespace}/p_year=YYYY/p_month=MM/p_day=DD.
func jobDir(job *engine.Job) string {
	d := time.UnixMilli(job.SegmentCreatedUnixMs).UTC()
	return fmt.Sprintf("%s/p_year=%04d/p_month=%02d/p_day=%02d",
		pathSegment("namespace", job.Namespace), d.Year(), int(d.Month()), d.Day())
}

// fileName is the final name of job's file.
func fileName(job *engine.Job) string { return pathSegment("job ID", job.ID) + parquetSuffix }

// tempName is the name the ParquetDir writer token writes job's file
// under before renaming it: derived from the ID, so the writer's retry
// finds (and replaces) the leftover of its failed attempt, and from the
// token, so no other writer ever uses it.
func tempName(job *engine.Job, token string) string {
	return tempPrefix + fileName(job) + "." + token + tempSuffix
}

const tempSuffix = ".tmp"

// isTempName reports whether a folder entry is a ParquetDir temp file.
func isTempName(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix)
}

// isTempOf reports whether a temp file name is the writer token's.
func isTempOf(name, token string) bool { return strings.HasSuffix(name, "."+token+tempSuffix) }

// pathSegment escapes s into one path segment that is safe both as part
// of an S3 key and as a file name: '%', '/', '\\' and control bytes are
// percent-encoded, and the names "." and ".." have their dots encoded.
// Everything else (including non-ASCII UTF-8) is kept, so ordinary names
// read as themselves. The mapping is injective because '%' itself is
// encoded. Namespaces are 1..256 bytes (segment.KeyFieldBytesMax), so the
// escaped form stays well inside S3's 1024-byte key limit.
// REQUIRES: s is not empty (what names the value in the panic).
func pathSegment(what, s string) string {
	if s == "" {
		panic("sinks: empty " + what + " in a path")
	}
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '%' || r == '/' || r == '\\' }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '%' || c == '/' || c == '\\' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
