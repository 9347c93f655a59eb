package httpsrc

import (
	"errors"
	"strings"
	"testing"
)

func TestFormatOf(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		want        Format
	}{
		{"application/x-ndjson", JSONLines},
		{"application/jsonl", JSONLines},
		{"application/x-jsonlines", JSONLines},
		{"application/json-lines", JSONLines},
		{"Application/X-NDJSON", JSONLines},
		{"application/x-ndjson; charset=utf-8", JSONLines},
		{"application/x-ndjson;charset=UTF-8", JSONLines},
		{`application/x-ndjson; charset="Utf-8"`, JSONLines},
		{"text/csv", CSV},
		{"text/csv; charset=utf-8; header=present", CSV},
		{"TEXT/CSV", CSV},
		{"application/vnd.apache.arrow.stream", ArrowIPC},
		{"application/vnd.apache.arrow.stream; charset=utf-8", ArrowIPC},
	} {
		got, err := FormatOf(tc.contentType)
		if err != nil || got != tc.want {
			t.Errorf("FormatOf(%q) = %v, %v; want %v", tc.contentType, got, err, tc.want)
		}
	}
}

func TestFormatOfRefuses(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		says        string // the message names this
	}{
		{"", "no Content-Type"},
		{"   ", "no Content-Type"},
		{"application/json", `"application/json"`},
		{"text/plain", `"text/plain"`},
		{"application/vnd.apache.arrow.file", `"application/vnd.apache.arrow.file"`},
		{"text/csv; charset=latin-1", `charset "latin-1"`},
		{"text/csv; charset=utf8", `charset "utf8"`},
		{"application/x-ndjson; charset=utf-16", `charset "utf-16"`},
		{"text/csv; charset", "mime:"},
		{"/csv", "mime:"},
	} {
		f, err := FormatOf(tc.contentType)
		if !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("FormatOf(%q) = %v, %v; want an error wrapping ErrUnsupportedType", tc.contentType, f, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("FormatOf(%q): %q does not say %q", tc.contentType, err, tc.says)
		}
		if !strings.Contains(tc.says, "charset") && !strings.Contains(err.Error(), "accepted: application/x-ndjson, application/jsonl, application/x-jsonlines, application/json-lines, text/csv, application/vnd.apache.arrow.stream") {
			t.Errorf("FormatOf(%q): %q does not list the accepted types", tc.contentType, err)
		}
	}
}

func TestFormatString(t *testing.T) {
	for f, want := range map[Format]string{JSONLines: "JSON lines", CSV: "CSV", ArrowIPC: "Arrow IPC stream", 0: "Format(0)", 9: "Format(9)"} {
		if got := f.String(); got != want {
			t.Errorf("Format(%d).String() = %q; want %q", int(f), got, want)
		}
	}
}
