package httpsrc

import (
	"fmt"
	"mime"
	"strings"
)

// Format is a request body's encoding, chosen by Content-Type.
type Format int

const (
	JSONLines Format = iota + 1
	CSV
	ArrowIPC
)

func (f Format) String() string {
	switch f {
	case JSONLines:
		return "JSON lines"
	case CSV:
		return "CSV"
	case ArrowIPC:
		return "Arrow IPC stream"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

type mediaType struct {
	name   string
	format Format
}

// mediaTypes lists each accepted media type with its format, in the
// order an error message lists them.
func mediaTypes() []mediaType {
	return []mediaType{
		{"application/x-ndjson", JSONLines},
		{"application/jsonl", JSONLines},
		{"application/x-jsonlines", JSONLines},
		{"application/json-lines", JSONLines},
		{"text/csv", CSV},
		{"application/vnd.apache.arrow.stream", ArrowIPC},
	}
}

// FormatOf maps a Content-Type header to a Format: application/x-ndjson,
// application/jsonl, application/x-jsonlines, application/json-lines →
// JSONLines; text/csv → CSV; application/vnd.apache.arrow.stream →
// ArrowIPC. Media-type parameters are parsed with mime.ParseMediaType;
// charset, if present, must be utf-8 (any case); other parameters are
// ignored. Anything else is an error wrapping ErrUnsupportedType, naming
// the type and listing the accepted ones.
func FormatOf(contentType string) (Format, error) {
	if strings.TrimSpace(contentType) == "" {
		return 0, fmt.Errorf("%w: no Content-Type; accepted: %s", ErrUnsupportedType, accepted())
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("%w: Content-Type %s: %v; accepted: %s", ErrUnsupportedType, quote(contentType), err, accepted())
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return 0, fmt.Errorf("%w: Content-Type %s: charset %s; only utf-8 is accepted", ErrUnsupportedType, quote(contentType), quote(cs))
	}
	for _, m := range mediaTypes() {
		if m.name == mt { // ParseMediaType lower-cases the type
			return m.format, nil
		}
	}
	return 0, fmt.Errorf("%w: Content-Type %s; accepted: %s", ErrUnsupportedType, quote(mt), accepted())
}

func accepted() string {
	var names []string
	for _, m := range mediaTypes() {
		names = append(names, m.name)
	}
	return strings.Join(names, ", ")
}
