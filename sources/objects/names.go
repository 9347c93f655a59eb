package objects

import (
	"fmt"
	"path"
	"strings"

	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// ignored reports whether key names an object that is not ready, or not
// data: a writer puts an object in place by writing it under a
// temporary name and renaming it. Temporary names are those with a path
// segment starting with "." (a hidden file or folder), or ending in
// ".tmp" or ".partial" (any case).
func ignored(key string) bool {
	if key == "" {
		return true
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, ".") {
			return true
		}
	}
	lower := strings.ToLower(key)
	return strings.HasSuffix(lower, ".tmp") || strings.HasSuffix(lower, ".partial")
}

// format is how an object is decoded.
type format int

const (
	jsonLines format = iota + 1
	csvText
	parquetFile
)

func (f format) String() string {
	switch f {
	case jsonLines:
		return "JSON lines"
	case csvText:
		return "CSV"
	case parquetFile:
		return "Parquet"
	}
	return fmt.Sprintf("format(%d)", int(f))
}

// text returns the httpsrc format of a text format.
func (f format) text() httpsrc.Format {
	if f == csvText {
		return httpsrc.CSV
	}
	return httpsrc.JSONLines
}

// formatOf returns the format of key: the configured one, or (FormatAuto)
// the one its extension names, in any case.
func formatOf(configured, key string) (format, error) {
	name := configured
	if name == FormatAuto {
		switch ext := strings.ToLower(path.Ext(key)); ext {
		case ".jsonl", ".ndjson":
			name = FormatJSONLines
		case ".csv":
			name = FormatCSV
		case ".parquet":
			name = FormatParquet
		default:
			return 0, fmt.Errorf("no format for the extension %q: .jsonl, .ndjson, .csv or .parquet, or set the source's format", ext)
		}
	}
	switch name {
	case FormatJSONLines:
		return jsonLines, nil
	case FormatCSV:
		return csvText, nil
	case FormatParquet:
		return parquetFile, nil
	}
	return 0, fmt.Errorf("unknown format %q", name) // New checked the configuration: a bug
}
