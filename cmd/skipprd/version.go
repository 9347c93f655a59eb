package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

const versionAbout = `Prints the build: the module's version ("(devel)" when built from a
checkout rather than "go install …@version"), the VCS revision and its
commit time, whether the tree had uncommitted changes, and the Go
version. Read from the build information Go embeds in the binary.`

func versionCommand(c *invocation) int {
	if len(c.args) > 0 {
		fmt.Fprintf(c.stderr, "skipprd version: takes no arguments, got %q\n", c.args)
		return exitUsage
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(c.stderr, "skipprd version: this binary carries no build information")
		return exitFail
	}
	printVersion(c.stdout, bi)
	return exitOK
}

// printVersion writes one "key value" line each: version, revision,
// time, modified (only when the VCS says), go.
func printVersion(w io.Writer, bi *debug.BuildInfo) {
	fmt.Fprintf(w, "skipprd  %s\n", bi.Main.Version)
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev, when := vcs["vcs.revision"], vcs["vcs.time"]
	if rev == "" {
		rev, when = "unknown (built without VCS information: go run, or -buildvcs=false)", ""
	}
	fmt.Fprintf(w, "revision %s\n", rev)
	if when != "" {
		fmt.Fprintf(w, "time     %s\n", when)
	}
	if m := vcs["vcs.modified"]; m != "" {
		fmt.Fprintf(w, "modified %s\n", m)
	}
	fmt.Fprintf(w, "go       %s\n", bi.GoVersion)
}
