package sinks

import (
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

func TestObjectKey(t *testing.T) {
	ms := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	for _, tc := range []struct {
		name, prefix, namespace string
		createdMs               int64
		want                    string
	}{
		{"plain", "lake", "events", ms("2026-08-01T12:00:00Z"), "lake/events/p_year=2026/p_month=08/p_day=01/abc.parquet"},
		{"no prefix", "", "events", ms("2026-08-01T12:00:00Z"), "events/p_year=2026/p_month=08/p_day=01/abc.parquet"},
		{"prefix slashes dropped", "/a/b/", "events", ms("2026-08-01T12:00:00Z"), "a/b/events/p_year=2026/p_month=08/p_day=01/abc.parquet"},
		{"UTC, not local time", "", "e", ms("2026-12-31T23:59:59.999-01:00"), "e/p_year=2027/p_month=01/p_day=01/abc.parquet"},
		{"last millisecond of a day", "", "e", ms("2026-02-28T23:59:59.999Z"), "e/p_year=2026/p_month=02/p_day=28/abc.parquet"},
		{"the epoch", "", "e", 0, "e/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"slash in namespace", "", "db/table", 0, "db%2Ftable/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"percent escaped, so escaping is one-to-one", "", "db%2Ftable", 0, "db%252Ftable/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"dot-dot", "", "..", 0, "%2E%2E/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"dot", "", ".", 0, "%2E/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"dots inside are fine", "", "a..b", 0, "a..b/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"backslash and control bytes", "", "a\\b\n\x7f", 0, "a%5Cb%0A%7F/p_year=1970/p_month=01/p_day=01/abc.parquet"},
		{"UTF-8 kept", "", "événements", 0, "événements/p_year=1970/p_month=01/p_day=01/abc.parquet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &engine.Job{ID: "abc", Namespace: tc.namespace, SegmentCreatedUnixMs: tc.createdMs}
			if got := ObjectKey(tc.prefix, job); got != tc.want {
				t.Fatalf("ObjectKey(%q, %q @ %d) = %q, want %q", tc.prefix, tc.namespace, tc.createdMs, got, tc.want)
			}
		})
	}
}

func TestParquetDirPathIsObjectKeyUnderRoot(t *testing.T) {
	job := &engine.Job{ID: "abc", Namespace: "events", SegmentCreatedUnixMs: fixtureCreatedUnixMs}
	for root, want := range map[string]string{
		"":        ObjectKey("", job),
		".":       ObjectKey("", job),
		"lake":    "lake/" + ObjectKey("", job),
		"a/b/../": "a/" + ObjectKey("", job),
	} {
		if got := NewParquetDir(noDisk{}, noExec{}, fixedRand(0), root).Path(job); got != want {
			t.Fatalf("root %q: path %q, want %q", root, got, want)
		}
	}
	for _, root := range []string{"..", "../x", "/abs"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("root %q outside the disk accepted", root)
				}
			}()
			NewParquetDir(noDisk{}, noExec{}, fixedRand(0), root)
		}()
	}
}
