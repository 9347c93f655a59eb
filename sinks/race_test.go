//go:build race

package sinks

// raceEnabled: the race detector slows Parquet encoding (zstd) about a
// hundredfold, so the seed loops run fewer seeds under it.
const raceEnabled = true
