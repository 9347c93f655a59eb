package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The log formats of SKIPPR_LOG_FORMAT.
const (
	logText = "text" // slog's key=value lines (the default)
	logJSON = "json" // one JSON object a line, for log shippers
)

// parseLogFormat checks a SKIPPR_LOG_FORMAT value ("" is the default).
func parseLogFormat(v string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(v)); f {
	case "", logText:
		return logText, nil
	case logJSON:
		return logJSON, nil
	default:
		return "", fmt.Errorf("log format %q: want text or json", v)
	}
}

// newLogger returns the daemon's logger writing to w in format. main
// builds it before run parses the rest of the environment, so an invalid
// format falls back to text here and run reports it (exit 2).
func newLogger(format string, w io.Writer) *slog.Logger {
	if f, err := parseLogFormat(format); err == nil && f == logJSON {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
