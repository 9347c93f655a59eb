package main

// The command line: subcommands and the flags of the settings people set
// per run. Every setting is an environment variable (README.md); a flag
// is the same setting, and wins over its variable. Nothing here touches
// DATA_DIR: an unknown command or flag prints the usage and exits 2
// before anything is opened, and help, version and check never open it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes of every command.
const (
	exitOK    = 0
	exitFail  = 1 // something failed at run time (a store, a sink, recovery)
	exitUsage = 2 // a wrong command line, an invalid setting or pipeline file
)

// envOnce makes run ingest what the sources hold at start, apply it, and
// exit (run --once).
const envOnce = "SKIPPR_ONCE"

// command is one subcommand.
type command struct {
	name    string
	args    string // after the name in the usage line
	summary string // one line
	about   string // help COMMAND's text after the usage line
	main    func(c *invocation) int
}

// invocation is one command's run: its flags parsed, its environment
// with the flags applied.
type invocation struct {
	ctx    context.Context
	args   []string // the arguments left after the flags
	asJSON bool     // --json (inspect): print JSON, for machines
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// commands in the order the usage lists them. It is set in init: help
// reads it.
var commands []*command

func init() {
	commands = []*command{
		{name: "run", args: "[--once] [flags]", main: runCommand, summary: "run the daemon (what a bare skipprd does)", about: runAbout},
		{name: "check", args: "[FILE] [--once] [flags]", main: checkCommand, summary: "check a pipeline file and the settings; touch nothing", about: checkAbout},
		{name: "inspect", args: "[segment ID] [--json] [flags]", main: inspectCommand, summary: "read a pipeline's WAL without starting it", about: inspectAbout},
		{name: "version", args: "", main: versionCommand, summary: "the build: module version, VCS revision and time, Go version", about: versionAbout},
		{name: "help", args: "[COMMAND]", main: helpCommand, summary: "this text, or one command's", about: helpAbout},
	}
}

// cli runs the command line args (without the program name) and returns
// the exit code. A bare skipprd, or one whose first argument is a flag
// other than help, is skipprd run.
func cli(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelpFlag(args[0]) {
		usage(stdout)
		return exitOK
	}
	name := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	cmd := commandNamed(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "skipprd: unknown command %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	inv, code, ok := parseFlags(cmd, args, getenv, stderr)
	if !ok {
		return code
	}
	inv.ctx, inv.stdout = ctx, stdout
	return cmd.main(inv)
}

// isHelpFlag reports whether a is -h, -help or --help (and the same with
// one or two dashes).
func isHelpFlag(a string) bool {
	switch strings.TrimLeft(a, "-") {
	case "h", "help":
		return strings.HasPrefix(a, "-")
	}
	return false
}

func commandNamed(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// settingFlag is a flag that sets an environment variable.
type settingFlag struct {
	name, arg, env, what string
	commands             []string // the commands that take it
}

// settingFlags: the settings people set per run.
var settingFlags = []settingFlag{
	{"config", "FILE", envPipelineFile, "the pipeline file", []string{"run", "check", "inspect"}},
	{"data-dir", "DIR", envDataDir, "where the WAL and the default lake live (default ./data)", []string{"run", "check", "inspect"}},
	{"wal-storage", "KIND", envWALStorage, "disk (the default), embedded or s3", []string{"run", "check", "inspect"}},
	{"admin-addr", "ADDR", envAdminAddr, "the admin listener, host:port or off (default 127.0.0.1:9090)", []string{"run", "check"}},
}

// parseFlags parses a command's flags. ok is false when the command
// line was wrong or asked for help; code is then the exit code.
func parseFlags(cmd *command, args []string, getenv func(string) string, stderr io.Writer) (inv *invocation, code int, ok bool) {
	fs := flag.NewFlagSet("skipprd "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the usage is printed below, once
	set := map[string]*string{}
	for _, s := range settingFlags {
		if takes(s, cmd.name) {
			set[s.env] = fs.String(s.name, "", fmt.Sprintf("`%s`: %s (%s)", s.arg, s.what, s.env))
		}
	}
	var once, asJSON *bool
	switch cmd.name {
	case "run":
		once = fs.Bool("once", false, "ingest what the sources hold at start, apply it to the sinks, and exit ("+envOnce+"=true)")
	case "check":
		once = fs.Bool("once", false, "check as run --once would: every source must have an end to reach ("+envOnce+"=true)")
	case "inspect":
		asJSON = fs.Bool("json", false, "print JSON, for machines")
	}
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stderr, cmd, fs)
		return nil, exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "skipprd %s: %v\n\n", cmd.name, err)
		commandUsage(stderr, cmd, fs)
		return nil, exitUsage, false
	}
	env := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		for _, s := range settingFlags {
			if s.name == f.Name {
				env[s.env] = *set[s.env]
			}
		}
	})
	if once != nil && *once {
		env[envOnce] = "true"
	}
	inv = &invocation{args: rest, getenv: overlay(env, getenv), stderr: stderr}
	inv.asJSON = asJSON != nil && *asJSON
	return inv, exitOK, true
}

// parseInterspersed parses flags anywhere among args (skipprd inspect
// segment ID --json), returning the arguments that are not flags; "--"
// ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), nil
		}
		rest, args = append(rest, args[0]), args[1:]
	}
}

func takes(s settingFlag, cmd string) bool {
	for _, c := range s.commands {
		if c == cmd {
			return true
		}
	}
	return false
}

// overlay is getenv with the variables of set replacing its own.
func overlay(set map[string]string, getenv func(string) string) func(string) string {
	if len(set) == 0 {
		return getenv
	}
	return func(name string) string {
		if v, ok := set[name]; ok {
			return v
		}
		return getenv(name)
	}
}

// usage is the text of skipprd help.
func usage(w io.Writer) {
	fmt.Fprint(w, `skipprd is an ELT ingest runner: sources hand records to a write-ahead
log; once durable they are acknowledged, then applied to the sinks
exactly once.

Usage:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-46s %s\n", strings.TrimSpace("skipprd "+c.name+" "+c.args), c.summary)
	}
	fmt.Fprint(w, `
Settings are environment variables (README.md lists them all). These
flags set the ones people set per run, and win over the variable:
`)
	for _, s := range settingFlags {
		fmt.Fprintf(w, "  --%-18s %s: %s (%s)\n", s.name+" "+s.arg, s.env, s.what, strings.Join(s.commands, ", "))
	}
	fmt.Fprint(w, `
Without a pipeline file skipprd ingests its built-in generator into
Iceberg tables under DATA_DIR/lake. "skipprd help COMMAND" says more.
`)
}

// commandUsage is the text of skipprd help COMMAND.
func commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", strings.TrimSpace("skipprd "+c.name+" "+c.args), strings.TrimSpace(c.about))
	if fs == nil {
		return
	}
	var flags strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		if arg == "value" { // a bool
			arg = ""
		}
		fmt.Fprintf(&flags, "  --%-18s %s\n", strings.TrimSpace(f.Name+" "+arg), strings.TrimPrefix(text, arg+": "))
	})
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
	}
}

const helpAbout = `Prints the commands, or what one command does and its flags.`

func helpCommand(c *invocation) int {
	switch len(c.args) {
	case 0:
		usage(c.stdout)
		return exitOK
	case 1:
		cmd := commandNamed(c.args[0])
		if cmd == nil {
			fmt.Fprintf(c.stderr, "skipprd help: unknown command %q\n\n", c.args[0])
			usage(c.stderr)
			return exitUsage
		}
		_, _, _ = parseFlags(cmd, []string{"-help"}, c.getenv, c.stdout)
		return exitOK
	default:
		fmt.Fprintf(c.stderr, "skipprd help: want at most one command, got %q\n", c.args)
		return exitUsage
	}
}

const runAbout = `Runs the daemon: recovers the WAL under DATA_DIR (or in its bucket),
starts the pipeline file's sources (SKIPPR_CONFIG; without one, the
built-in generator), acknowledges each record once it is durable, and
applies committed segments to the sinks exactly once. SIGINT or SIGTERM
stops it gracefully (exit 0); a second signal exits at once, and the next
start recovers from the WAL.

With --once it ingests what the sources hold at start (the files and
objects listed then, a Postgres CDC source up to the server's current
LSN, a Kafka source up to its partitions' high watermarks, a NATS
source up to its stream's last sequence), commits it, applies every
job to the sinks, reclaims, and exits 0 — or exits 1 naming what
stopped it, with nothing acknowledged lost; the next run picks up only
what arrived since. HTTP, MQTT and generator sources have no end to
reach and are refused in this mode (exit 2), as is a Kafka source with
a consumer group.`

func runCommand(c *invocation) int {
	if len(c.args) > 0 {
		fmt.Fprintf(c.stderr, "skipprd run: takes no arguments, got %q (a pipeline file is --config FILE)\n", c.args)
		return exitUsage
	}
	log := newLogger(c.getenv(envLogFormat), c.stderr)
	return run(c.ctx, c.getenv, c.stdout, log)
}
