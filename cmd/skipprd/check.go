package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

const checkAbout = `Checks a pipeline file (FILE, else --config or SKIPPR_CONFIG; without
one, the built-in default pipeline) and the settings in the environment
and the flags, as the daemon does at start-up, and says which of the
environment variables the file names (url_env, token_env, …) are not
set. Every problem is printed on a line of its own, with the file and
line where it has one, and the exit code is 2; with none it prints what
the daemon would run and exits 0. It opens nothing: no DATA_DIR, no
store, no database, no network.`

func checkCommand(c *invocation) int {
	getenv := c.getenv
	switch len(c.args) {
	case 0:
	case 1:
		getenv = overlay(map[string]string{envPipelineFile: c.args[0]}, getenv)
	default:
		fmt.Fprintf(c.stderr, "skipprd check: want at most one pipeline file, got %q\n", c.args)
		return exitUsage
	}
	r := checkSetup(getenv)
	for _, p := range r.problems {
		fmt.Fprintln(c.stdout, p)
	}
	if len(r.problems) > 0 {
		fmt.Fprintf(c.stderr, "skipprd check: %d problem(s); the daemon would not start\n", len(r.problems))
		return exitUsage
	}
	for _, line := range r.summary {
		fmt.Fprintln(c.stdout, line)
	}
	for _, a := range r.adjusted {
		fmt.Fprintf(c.stdout, "note: %s=%s is used as %s: %s\n", a.Var, a.Given, a.Used, a.Why)
	}
	return exitOK
}

// checked is what skipprd check found.
type checked struct {
	problems []string   // one a line, file:line first where there is one
	summary  []string   // what would run, when there is no problem
	adjusted []adjusted // settings used otherwise than given
}

// checkSetup checks what run checks before it opens anything: chaos
// mode's variables, the pipeline file, the settings (with the file's),
// the sinks' lane limits, in once mode the sources that cannot end, and
// the variables the file names. The file's problems come first, by line,
// then the settings'.
func checkSetup(getenv func(string) string) checked {
	var file, settings []error
	_, err := parseChaos(getenv)
	settings = append(settings, flatten(err)...)
	pf, fileErr := pipelineOf(getenv)
	file = append(file, flatten(fileErr)...)
	if fileErr == nil {
		getenv = pf.applySettings(getenv)
	}
	cfg, err := parseConfig(getenv)
	settings = append(settings, flatten(err)...)
	if fileErr == nil && err == nil {
		file = append(file, flatten(pf.resolveLanes(cfg.Lake))...)
		if cfg.Once {
			file = append(file, flatten(onceRefusals(pf))...)
		}
	}
	if pf != nil { // a file with problems still names its variables
		file = append(file, unsetEnvRefs(pf, getenv)...)
	}
	slices.SortStableFunc(file, func(a, b error) int { return cmp.Compare(problemLine(a), problemLine(b)) })
	r := checked{problems: messages(append(file, settings...))}
	if len(r.problems) == 0 {
		r.summary = describeSetup(pf, cfg)
		r.adjusted = append(cfg.adjustments(getenv), pf.laneAdjustments(getenv)...)
	}
	return r
}

// problemLine is the file line of a pipeline problem, 0 for others.
func problemLine(err error) int {
	if pe, ok := errors.AsType[*pipelineError](err); ok {
		return pe.Line
	}
	return 0
}

// unsetEnvRefs: a problem for each variable the file names that is not
// set (the daemon refuses to start without it).
func unsetEnvRefs(pf *pipelineFile, getenv func(string) string) []error {
	var out []error
	for _, ref := range pf.EnvRefs {
		if strings.TrimSpace(getenv(ref.value)) != "" {
			continue
		}
		out = append(out, &pipelineError{Path: pf.Path, Line: ref.line, Where: ref.where,
			Msg: fmt.Sprintf("%s names the environment variable %s, which is not set here", ref.shown, ref.value)})
	}
	return out
}

// describeSetup: what the daemon would run, a line each.
func describeSetup(pf *pipelineFile, cfg config) []string {
	var out []string
	if pf.Path == "" {
		out = append(out, fmt.Sprintf("no pipeline file (--config or %s): the built-in generator into Iceberg tables under %s/%s", envPipelineFile, cfg.DataDir, lakeDir))
	} else {
		out = append(out, fmt.Sprintf("%s: ok: %d sink(s), %d source(s)", pf.Path, len(pf.Sinks), len(pf.Sources)))
	}
	for _, s := range pf.Sinks {
		out = append(out, fmt.Sprintf("  sink %s: %s", s.Name, s.Kind))
	}
	for _, s := range pf.Sources {
		to := s.Sink
		if to == "" {
			to = "by namespace"
		}
		out = append(out, fmt.Sprintf("  source %s: %s → %s", s.Name, s.Kind, to))
	}
	wal := fmt.Sprintf("settings: ok: pipeline %s, WAL %s under %s", cfg.Pipeline, cfg.WALStorage, cfg.DataDir)
	if cfg.Bucket != "" {
		wal += ", segments in bucket " + cfg.Bucket
	}
	return append(out, wal)
}

// flatten is a joined error's parts, joined parts flattened too.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// messages are the errors' texts, one problem a line.
func messages(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, strings.Split(e.Error(), "\n")...)
	}
	return out
}

// problems is a joined error's messages, one a line.
func problems(err error) []string { return messages(flatten(err)) }

// logProblems logs each problem of err as a record of its own, so that a
// log line is a problem, not an escaped list of them.
func logProblems(log *slog.Logger, msg string, err error, attrs ...any) {
	for _, p := range problems(err) {
		log.Error(msg, append(attrs, "problem", p)...)
	}
}
