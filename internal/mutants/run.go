package mutants

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Defaults of a harness run.
var Defaults = Options{
	Iters: "1e5",
	// 16 seeds keep a full run near 20 minutes on two cores; a mutant
	// whose kill needs a rarer world raises its own (seeds: in the file).
	Seeds:  16,
	Faults: "swarm",
	// About 2.5 times what one 1e5-step world takes on one core of a
	// small machine (12 s): a sweep that needs more than that hangs or
	// spins, which is worth reporting on its own.
	PerSeed: 30 * time.Second,
	Go:      "go",
}

// Options configure a harness run.
type Options struct {
	Root    string        // repository root
	File    string        // the data file
	Only    []string      // mutant ids to run; empty: all
	Iters   string        // steps per world, as simulate's -iters takes it
	Seeds   int           // seeds per mutant unless its block says otherwise
	Force   int           // if > 0, every mutant sweeps this many seeds
	Faults  string        // profile unless the mutant's block says otherwise
	PerSeed time.Duration // timeout budget per seed (divided among the cores)
	Go      string        // the go command
	Keep    bool          // keep the scratch directory (its path is logged)
	Log     io.Writer     // progress lines; nil: discarded
}

// Status is what a sweep made of a mutant.
type Status uint8

const (
	Killed        Status = iota // a seed failed: an oracle's violation, or a panic in the world
	KilledCrash                 // simulate died without naming a seed (a fatal runtime error)
	KilledTimeout               // the sweep did not finish within its time budget
	KilledBuild                 // the mutated tree does not compile (a weak kill: check the mutant)
	Survived                    // every seed passed: the simulator cannot see this bug
	Invalid                     // the killing seed fails without the mutant too: the kill proves nothing
)

var statusNames = [...]string{"killed", "killed(crash)", "killed(timeout)", "killed(build)", "SURVIVED", "INVALID"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status?"
}

// IsKill reports whether the sweep caught the mutant.
func (s Status) IsKill() bool { return s <= KilledBuild }

// Result is one mutant's outcome.
type Result struct {
	Mutant  Mutant
	Line    int    // line of Mutant.File it changes
	Status  Status //
	Seed    uint64 // the killing seed; 0 if the kill names none
	How     string // the violation, panic, compiler error, crash output or timeout
	Seeds   int    // seeds the sweep was allowed
	Iters   string // steps per world
	Faults  string // the profile swept
	Elapsed time.Duration
}

// harness is one run: the scratch tree and its baseline binary.
type harness struct {
	o        Options
	dir      string // scratch directory: tree/ and the binaries
	tree     string
	base     string                   // the unmutated simulate
	baseline map[string]baselineCheck // seed/profile → the baseline's verdict
}

type baselineCheck struct {
	failed bool
	how    string
}

// Run runs the harness: every selected mutant, one at a time. It returns
// an error, and no results, if a mutant is STALE or the baseline does not
// build; a sweep's outcome is a Result, whatever it is.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	ms, err := Load(o.File)
	if err != nil {
		return nil, err
	}
	if ms, err = selectMutants(ms, o.Only); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "skipprd-mutants-")
	if err != nil {
		return nil, err
	}
	if o.Keep {
		fmt.Fprintf(o.Log, "scratch directory (kept): %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	h := &harness{o: o, dir: dir, tree: filepath.Join(dir, "tree"), base: filepath.Join(dir, "simulate-base"), baseline: map[string]baselineCheck{}}
	n, err := copyTree(o.Root, h.tree)
	if err != nil {
		return nil, fmt.Errorf("scratch copy: %w", err)
	}
	fmt.Fprintf(o.Log, "scratch tree: %d files copied from %s\n", n, o.Root)
	if err := h.checkStale(ms); err != nil {
		return nil, err
	}
	start := time.Now()
	if out, err := h.build(ctx, h.base); err != nil {
		return nil, fmt.Errorf("the unmutated tree does not build: %v\n%s", err, out)
	}
	fmt.Fprintf(o.Log, "baseline simulate built in %v\n", time.Since(start).Round(time.Second))
	var results []Result
	for i, m := range ms {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		r := h.runMutant(ctx, m)
		if err := ctx.Err(); err != nil {
			return results, err // interrupted: this sweep's outcome means nothing
		}
		results = append(results, r)
		fmt.Fprintf(o.Log, "[%d/%d] %-28s %-15s %s\n", i+1, len(ms), m.ID, r.Status, progressNote(r))
	}
	return results, nil
}

func selectMutants(ms []Mutant, only []string) ([]Mutant, error) {
	if len(only) == 0 {
		return ms, nil
	}
	byID := map[string]Mutant{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	var out []Mutant
	for _, id := range only {
		m, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("no mutant %q in the data file", id)
		}
		out = append(out, m)
	}
	return out, nil
}

// checkStale applies every mutant to the scratch tree's file in memory:
// one that does not match exactly once stops the run before any sweep.
func (h *harness) checkStale(ms []Mutant) error {
	var stale []string
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join(h.tree, filepath.FromSlash(m.File)))
		if err == nil {
			_, err = m.Apply(src)
		}
		if err != nil {
			stale = append(stale, err.Error())
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("%d mutant(s) no longer apply; fix their orig text:\n  %s", len(stale), strings.Join(stale, "\n  "))
	}
	return nil
}

func (h *harness) build(ctx context.Context, out string) (string, error) {
	cmd := exec.CommandContext(ctx, h.o.Go, "build", "-o", out, "./cmd/simulate")
	cmd.Dir = h.tree
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func (h *harness) runMutant(ctx context.Context, m Mutant) (r Result) {
	start := time.Now()
	r = Result{Mutant: m, Seeds: h.o.Seeds, Iters: h.o.Iters, Faults: h.o.Faults}
	if m.Seeds > 0 {
		r.Seeds = m.Seeds
	}
	if h.o.Force > 0 {
		r.Seeds = h.o.Force
	}
	if m.Faults != "" {
		r.Faults = m.Faults
	}
	defer func() { r.Elapsed = time.Since(start) }()
	bin := filepath.Join(h.dir, "simulate-mutant")
	out, err := h.buildMutant(ctx, m, bin, &r.Line)
	if err != nil {
		r.Status, r.How = KilledBuild, "build: "+firstLines(out+err.Error(), 3)
		return r
	}
	h.sweep(ctx, bin, &r)
	if r.Status == Killed && r.Seed != 0 {
		if b := h.checkBaseline(ctx, r.Seed, r.Faults); b.failed {
			r.Status = Invalid
			r.How += fmt.Sprintf(" — but the unmutated simulator fails seed %d too: %s", r.Seed, b.how)
		}
	}
	return r
}

// buildMutant writes the mutated file, builds, and restores the file
// whatever happens.
func (h *harness) buildMutant(ctx context.Context, m Mutant, bin string, line *int) (string, error) {
	path := filepath.Join(h.tree, filepath.FromSlash(m.File))
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	mutated, err := m.Apply(orig)
	if err != nil {
		return "", err
	}
	*line = m.LineNo(orig)
	if err := os.WriteFile(path, mutated, info.Mode()); err != nil {
		return "", err
	}
	defer func() {
		if err := os.WriteFile(path, orig, info.Mode()); err != nil {
			panic(fmt.Sprintf("mutants: cannot restore %s in the scratch tree: %v", path, err))
		}
	}()
	return h.build(ctx, bin)
}

// sweep runs simulate on the mutant and classifies the outcome.
func (h *harness) sweep(ctx context.Context, bin string, r *Result) {
	budget := time.Minute + time.Duration(r.Seeds)*h.o.PerSeed/time.Duration(runtime.NumCPU())
	sctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	args := []string{"-seed", "1", "-seeds", strconv.Itoa(r.Seeds), "-iters", h.o.Iters, "-faults", r.Faults, "-failfast"}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(sctx, bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = h.tree, &stdout, &stderr
	err := cmd.Run()
	switch {
	case sctx.Err() != nil && ctx.Err() == nil:
		r.Status, r.How = KilledTimeout, fmt.Sprintf("timeout: the sweep of %d seeds did not finish within %v", r.Seeds, budget)
		return
	case err == nil:
		r.Status = Survived
		return
	}
	if seed, how, ok := firstFailure(stdout.String()); ok {
		r.Status, r.Seed, r.How = Killed, seed, how
		return
	}
	r.Status, r.How = KilledCrash, "crash: "+crashLine(stderr.String(), err)
}

// checkBaseline replays one seed on the unmutated simulator.
func (h *harness) checkBaseline(ctx context.Context, seed uint64, faults string) baselineCheck {
	key := fmt.Sprintf("%d/%s", seed, faults)
	if b, ok := h.baseline[key]; ok {
		return b
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute+4*h.o.PerSeed)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(sctx, h.base, "-seed", strconv.FormatUint(seed, 10), "-iters", h.o.Iters, "-faults", faults)
	cmd.Dir, cmd.Stdout, cmd.Stderr = h.tree, &stdout, &stderr
	err := cmd.Run()
	var b baselineCheck
	if err != nil {
		b.failed = true
		if _, how, ok := firstFailure(stdout.String()); ok {
			b.how = how
		} else {
			b.how = crashLine(stderr.String(), err)
		}
	}
	h.baseline[key] = b
	return b
}

// firstFailure finds the first failing seed in simulate's output and its
// first violation:
//
//	FAIL seed=7 plan=… (summary)
//	  violation: unit … acked before any marker holding it landed
func firstFailure(out string) (seed uint64, how string, ok bool) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		rest, found := strings.CutPrefix(line, "FAIL seed=")
		if !found {
			continue
		}
		num, _, _ := strings.Cut(rest, " ")
		s, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			continue
		}
		how = "(no violation line)"
		if i+1 < len(lines) {
			if v, ok := strings.CutPrefix(lines[i+1], "  violation: "); ok {
				how = v
			}
		}
		return s, how, true
	}
	return 0, "", false
}

// crashLine picks the line of a dead process's stderr that says why.
func crashLine(stderr string, err error) string {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			return line
		}
	}
	if s := strings.TrimSpace(stderr); s != "" {
		return firstLines(s, 2)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	return err.Error()
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

func progressNote(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v", r.Elapsed.Round(time.Second))
	if r.Seed != 0 {
		fmt.Fprintf(&b, " seed=%d", r.Seed)
	}
	if r.How != "" {
		fmt.Fprintf(&b, " %s", truncate(r.How, 140))
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// copyTree copies the files git tracks or would add, as they are on disk
// (uncommitted edits included; ignored files such as data/ and bin/ not),
// from root to dst. It returns how many files it copied.
func copyTree(root, dst string) (int, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return 0, fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	n := 0
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			return n, err
		}
		if !info.Mode().IsRegular() {
			continue // symlinks and submodules: none in this repository
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return n, err
		}
		to := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return n, err
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
