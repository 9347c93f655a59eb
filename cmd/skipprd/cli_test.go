package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// cliRun runs the command line args with env and returns the exit code,
// stdout and stderr.
func cliRun(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli(context.Background(), args, envOf(env), &out, &errOut)
	return code, out.String(), errOut.String()
}

// noDataDir fails the test if dir exists: a command that must not touch
// DATA_DIR created it.
func noDataDir(t *testing.T, dir, what string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s: DATA_DIR %s exists (stat: %v); it must not be touched", what, dir, err)
	}
}

func TestCLIHelpListsEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"-help"}} {
		code, out, _ := cliRun(t, nil, args...)
		if code != exitOK {
			t.Fatalf("%q: exit %d, want 0", args, code)
		}
		for _, c := range commands {
			if !strings.Contains(out, "skipprd "+c.name) || !strings.Contains(out, c.summary) {
				t.Fatalf("%q: usage lacks %q (%s):\n%s", args, c.name, c.summary, out)
			}
		}
		for _, f := range settingFlags {
			if !strings.Contains(out, "--"+f.name) || !strings.Contains(out, f.env) {
				t.Fatalf("%q: usage lacks the flag --%s (%s):\n%s", args, f.name, f.env, out)
			}
		}
	}
}

func TestCLIHelpOfOneCommand(t *testing.T) {
	for _, c := range commands {
		code, out, errOut := cliRun(t, nil, "help", c.name)
		if code != exitOK || !strings.Contains(out, "Usage: skipprd "+c.name) || errOut != "" {
			t.Fatalf("help %s: exit %d, stdout:\n%s\nstderr:\n%s", c.name, code, out, errOut)
		}
		code, out2, _ := cliRun(t, nil, c.name, "--help")
		if code != exitOK {
			t.Fatalf("%s --help: exit %d, want 0", c.name, code)
		}
		if c.name != "help" && !strings.Contains(out2+out, strings.Fields(c.about)[0]) {
			t.Fatalf("%s --help: no about text:\n%s", c.name, out2)
		}
	}
	_, out, _ := cliRun(t, nil, "help", "run")
	for _, want := range []string{"--once", "--config", "--data-dir", "--wal-storage", "--admin-addr"} {
		if !strings.Contains(out, want) {
			t.Fatalf("help run lacks %s:\n%s", want, out)
		}
	}
	_, out, _ = cliRun(t, nil, "help", "inspect")
	if !strings.Contains(out, "--json") || strings.Contains(out, "--admin-addr") {
		t.Fatalf("help inspect: want --json and no --admin-addr:\n%s", out)
	}
}

// A wrong command line prints the usage and exits 2, and never starts a
// daemon: DATA_DIR is not created.
func TestCLIWrongCommandLineNeverStarts(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	env := map[string]string{envDataDir: data, envAdminAddr: "off"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"run", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"run", "extra"}, "takes no arguments"},
		{[]string{"run", "--config"}, "flag needs an argument"},
		{[]string{"version", "x"}, "takes no arguments"},
		{[]string{"check", "a.yaml", "b.yaml"}, "at most one pipeline file"},
		{[]string{"check", "--admin-addr=x", "--json"}, "flag provided but not defined: -json"},
		{[]string{"version", "--once"}, "flag provided but not defined: -once"},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"inspect", "--admin-addr", ":1"}, "flag provided but not defined: -admin-addr"},
	}
	for _, c := range cases {
		code, out, errOut := cliRun(t, env, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Usage") && !strings.Contains(errOut, "skipprd") {
			t.Fatalf("%q: exit %d (want 2), stderr:\n%s\nstdout:\n%s", c.args, code, errOut, out)
		}
		noDataDir(t, data, strings.Join(c.args, " "))
	}
}

// Each flag is its environment variable, and wins over it.
func TestCLIFlagsWinOverTheirVariables(t *testing.T) {
	dir := t.TempDir()
	fromEnv, fromFlag := filepath.Join(dir, "env"), filepath.Join(dir, "flag")
	env := map[string]string{envDataDir: fromEnv, envWALStorage: "embedded", envAdminAddr: "bad"}
	code, out, _ := cliRun(t, env, "check", "--data-dir", fromFlag, "--wal-storage=disk", "--admin-addr", "off")
	if code != exitOK || !strings.Contains(out, "WAL disk under "+fromFlag) {
		t.Fatalf("exit %d, want 0 and the flag's DATA_DIR and WAL_STORAGE:\n%s", code, out)
	}
	code, out, _ = cliRun(t, env, "check")
	if code != exitUsage || !strings.Contains(out, `SKIPPR_ADMIN_ADDR="bad"`) {
		t.Fatalf("without the flags: exit %d, want 2 naming SKIPPR_ADMIN_ADDR:\n%s", code, out)
	}
	noDataDir(t, fromEnv, "check")
	noDataDir(t, fromFlag, "check")
}

func TestCheckListsEveryProblemWithItsLine(t *testing.T) {
	path := writePipeline(t, doc(
		"sinks:",
		"  lake: {kind: parquet-dir, path: lake, colour: red}", // line 2: unknown key
		"  db: {kind: postgres, url_env: PG_URL_FOR_CHECK}",    // line 3: its variable is unset
		"sources:",
		"  - {name: api, kind: http, sink: lake}",
		"  - {name: Bad, kind: files, path: in, namespace: x, sink: nowhere}", // line 6: name, sink
	))
	data := filepath.Join(t.TempDir(), "data")
	env := map[string]string{envDataDir: data, envBufferBytes: "-1", envWALSyncMode: "sometimes"}
	code, out, errOut := cliRun(t, env, "check", path)
	if code != exitUsage {
		t.Fatalf("exit %d, want 2:\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		path + ":2: ", `unknown key "colour"`,
		path + ":6: ", `name "Bad"`,
		path + ":6: ", `"nowhere"`,
		`BUFFER_THRESHOLD_BYTES="-1"`, "",
		`WAL_SYNC_MODE="sometimes"`, "",
		path + ":3: ", "url_env names the environment variable PG_URL_FOR_CHECK, which is not set here",
	}
	for i := 0; i < len(want); i += 2 {
		if !anyLine(lines, want[i], want[i+1]) {
			t.Fatalf("no line with %q and %q among:\n%s", want[i], want[i+1], out)
		}
	}
	// The file's problems come first, by line, then the settings'.
	if !strings.HasPrefix(lines[0], path+":2:") || !strings.HasPrefix(lines[len(lines)-1], "WAL_SYNC_MODE") ||
		!strings.HasPrefix(lines[1], path+":3:") {
		t.Fatalf("want the file's problems by line, then the settings':\n%s", out)
	}
	if !strings.Contains(errOut, "problem(s)") {
		t.Fatalf("stderr does not count the problems: %q", errOut)
	}
	noDataDir(t, data, "check")
	// The variable set, the file's own problems remain and the unset one goes.
	env["PG_URL_FOR_CHECK"] = "postgres://x"
	_, out, _ = cliRun(t, env, "check", "--config", path)
	if strings.Contains(out, "PG_URL_FOR_CHECK") || !strings.Contains(out, `unknown key "colour"`) {
		t.Fatalf("with PG_URL_FOR_CHECK set:\n%s", out)
	}
}

func anyLine(lines []string, prefix, part string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, part) {
			return true
		}
	}
	return false
}

func TestCheckPassesAValidFileAndTheDefault(t *testing.T) {
	path := writePipeline(t, doc(
		"sinks: {lake: {kind: parquet-dir, path: lake}}",
		"sources: [{name: api, kind: http, sink: lake}, {name: drops, kind: files, path: in, namespace: d, sink: lake}]",
	))
	data := filepath.Join(t.TempDir(), "data")
	code, out, errOut := cliRun(t, map[string]string{envDataDir: data, envBufferBytes: "1"}, "check", path)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, want 0:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{path + ": ok: 1 sink(s), 2 source(s)", "sink lake: parquet-dir", "source drops: files → lake",
		"settings: ok", "note: BUFFER_THRESHOLD_BYTES=1 is used as"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
	code, out, _ = cliRun(t, map[string]string{envDataDir: data}, "check")
	if code != exitOK || !strings.Contains(out, "no pipeline file") {
		t.Fatalf("default: exit %d:\n%s", code, out)
	}
	noDataDir(t, data, "check")
}

func TestCheckMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	code, out, _ := cliRun(t, nil, "check", missing)
	if code != exitUsage || !strings.Contains(out, missing+": cannot open it") {
		t.Fatalf("exit %d, want 2 naming the file:\n%s", code, out)
	}
}

// Start-up logs each problem as a record of its own (it used to log them
// as one escaped err="…\n…" field).
func TestRunLogsEachProblemOnItsOwn(t *testing.T) {
	path := writePipeline(t, doc(
		"sinks: {lake: {kind: parquet-dir, path: lake, colour: red}}",
		"sources: [{name: Bad, kind: http, sink: lake}]",
	))
	code, logs := runPipelineEnv(t, map[string]string{envPipelineFile: path})
	n := strings.Count(logs, `msg="invalid pipeline file"`)
	if code != exitUsage || n != 2 || strings.Contains(logs, `\n`) {
		t.Fatalf("exit %d, %d records (want 2, no escaped newline):\n%s", code, n, logs)
	}
	code, logs = runPipelineEnv(t, map[string]string{envBufferBytes: "x", envStopGrace: "0"})
	if n := strings.Count(logs, `msg="invalid configuration"`); code != exitUsage || n != 2 {
		t.Fatalf("exit %d, %d records (want 2):\n%s", code, n, logs)
	}
}

func TestPrintVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-07T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	var b bytes.Buffer
	printVersion(&b, bi)
	want := "skipprd  v1.2.3\nrevision abc123\ntime     2026-12-07T00:00:00Z\nmodified true\ngo       go1.26.0\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printVersion(&b, &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}})
	if !strings.Contains(b.String(), "revision unknown (built without VCS information") {
		t.Fatalf("without VCS settings:\n%s", b.String())
	}
}

// The binary as a user runs it: version names the commit it was built
// from, and --help and --bogus exit without creating ./data.
func TestBinaryVersionAndUsage(t *testing.T) {
	bin := buildDaemon(t)
	cwd := t.TempDir()
	cmd := exec.Command(bin, "version")
	cmd.Dir = cwd
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("skipprd version: %v", err)
	}
	if !strings.HasPrefix(string(out), "skipprd  ") || !strings.Contains(string(out), "go       go1.") {
		t.Fatalf("skipprd version:\n%s", out)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if want := "revision " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
			t.Fatalf("skipprd version does not name the checkout's commit (%s):\n%s", want, out)
		}
	}
	for _, c := range []struct {
		arg  string
		code int
	}{{"--help", 0}, {"--bogus", 2}, {"help", 0}} {
		cmd := exec.Command(bin, c.arg)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "DATA_DIR=", "SKIPPR_ADMIN_ADDR=off")
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != c.code || !strings.Contains(string(out), "skipprd run") {
			t.Fatalf("skipprd %s: exit %d (want %d):\n%s", c.arg, cmd.ProcessState.ExitCode(), c.code, out)
		}
		noDataDir(t, filepath.Join(cwd, "data"), "skipprd "+c.arg)
	}
}

// The README's first screen shows every command, and each command line
// it shows parses (its flags exist): README and binary stay in step.
func TestReadmeFirstScreenShowsEveryCommand(t *testing.T) {
	const firstScreen = 50 // lines
	lines := strings.Split(readRepoFile(t, "README.md"), "\n")[:firstScreen]
	shown := map[string]bool{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "bin/skipprd ") {
			continue
		}
		l, _, _ = strings.Cut(l, "#")
		args := strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(l))[1:]
		cmd := commandNamed(args[0])
		if cmd == nil {
			t.Fatalf("README shows an unknown command: %q", l)
		}
		if _, code, ok := parseFlags(cmd, args[1:], envOf(nil), io.Discard); !ok {
			t.Fatalf("README's %q does not parse (exit %d)", l, code)
		}
		shown[cmd.name] = true
	}
	for _, c := range commands {
		if !shown[c.name] {
			t.Fatalf("the README's first %d lines do not show skipprd %s", firstScreen, c.name)
		}
	}
	if !slices.Contains(lines, "make run      # build and start the daemon; Ctrl-C stops it") {
		t.Fatalf("the README's first %d lines lost make run", firstScreen)
	}
}

// A bare skipprd with flags is skipprd run with them: nothing that
// worked before the commands existed breaks.
func TestCLIBareFlagsRun(t *testing.T) {
	path := writePipeline(t, doc("sinks: {lake: {kind: parquet-dir, path: lake, colour: red}}", "sources: [{name: a, kind: http, sink: lake}]"))
	data := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{{"--config", path}, {"run", "--config=" + path}} {
		code, _, errOut := cliRun(t, map[string]string{envDataDir: data, envAdminAddr: "off"}, args...)
		if code != exitUsage || !strings.Contains(errOut, `msg="invalid pipeline file"`) || !strings.Contains(errOut, `unknown key \"colour\"`) {
			t.Fatalf("%q: exit %d, want run's refusal of the file:\n%s", args, code, errOut)
		}
	}
	noDataDir(t, data, "run of an invalid file")
}
