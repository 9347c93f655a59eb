package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/skipprd/skipprd/sim"
)

// divergeContext is how many records before the first difference a
// divergence report prints: what a human needs to see how it came about.
const divergeContext = 8

// checkTwiceArgs rejects flags -check-determinism cannot honour.
func checkTwiceArgs(o options) error {
	switch {
	case !o.twice:
		return nil
	case o.seeds > 1:
		return errors.New("-check-determinism runs one seed twice; drop -seeds (loop over seeds in the shell)")
	case o.trace != "":
		return errors.New("-check-determinism prints the diverging events itself; drop -trace")
	}
	return nil
}

// checkDeterminism is simulate -check-determinism: run the seed (or the
// -replay file) twice, compare, print the verdict; it reports whether the
// runs were the same.
func checkDeterminism(o options, out io.Writer) (bool, error) {
	jobs, err := o.jobs()
	if err != nil {
		return false, err
	}
	return checkJobTwice(jobs[0], out, nil), nil
}

// worldTweak is a test hook: it may make the second world differ.
type worldTweak func(second bool, w *sim.World)

func checkJobTwice(j job, out io.Writer, tweak worldTweak) bool {
	var first *sim.Result
	run := func(second bool, rec *sim.Recorder) {
		cfg, _ := j.config()
		cfg.Recorder = rec
		w := sim.NewWorld(cfg)
		if tweak != nil {
			tweak(second, w)
		}
		if r := w.Run(nil); first == nil {
			first = &r
		}
	}
	d := sim.CheckDeterminism(run, divergeContext)
	head := fmt.Sprintf("seed=%d iters=%d faults=%s", j.seed, j.iters, j.profile)
	if d.Same {
		fmt.Fprintf(out, "deterministic: %s: two runs, the same trace hash=%016x over %d events (%d steps)\n",
			head, d.First.Hash, d.First.Events, d.First.Steps)
		if first.Err() != nil {
			fmt.Fprintf(out, "  note: the run itself fails its checks (%d violations); run it without -check-determinism to see them\n",
				len(first.Violations))
		}
		return true
	}
	printDivergence(out, head, d)
	fmt.Fprintf(out, "  reproduce: %s -check-determinism\n", j.command(""))
	return false
}

func printDivergence(out io.Writer, head string, d sim.Divergence) {
	if !d.Located {
		where := fmt.Sprintf("records %d..%d", d.Span.Lo, d.Span.Hi)
		if d.Span.Lo == d.Span.Hi {
			where = fmt.Sprintf("record %d", d.Span.Lo)
		}
		fmt.Fprintf(out, "NOT deterministic: %s: the runs diverge at %s (the second run stopped at step %d, after %d events),\n",
			head, where, d.Second.Steps, d.Second.Events)
		fmt.Fprintf(out, "  but %s; its events would mislead, so none are printed\n", d.Problem)
		return
	}
	at := d.A
	if at == nil {
		at = d.B
	}
	fmt.Fprintf(out, "NOT deterministic: %s: the runs diverge at step %d, trace event %d (record %d, sim time %v)\n",
		head, at.Step, at.Event, d.Record, at.At)
	if len(d.Before) > 0 {
		fmt.Fprintf(out, "  the %d records before it, the same in both runs:\n", len(d.Before))
		for i := range d.Before {
			fmt.Fprintf(out, "    %s\n", recordLine(&d.Before[i]))
		}
	}
	fmt.Fprintln(out, "  the first difference:")
	for i, r := range []*sim.WindowRecord{d.A, d.B} {
		fp := []sim.Fingerprints{d.First, d.Second}[i]
		if r == nil {
			fmt.Fprintf(out, "    run %d: ended after step %d, %d events\n", i+1, fp.Steps, fp.Events)
			continue
		}
		fmt.Fprintf(out, "    run %d: %s\n", i+1, recordLine(r))
	}
	if (d.A != nil && d.A.IsStep) || (d.B != nil && d.B.IsStep) {
		fmt.Fprintln(out, "  (a step line is a scheduler step: its time and sequence number, which a -trace dump does not print)")
	}
}

// recordLine prints a record as a -trace dump line, prefixed by its step
// and, for an event, its index (its line number, from 0, in a dump).
func recordLine(r *sim.WindowRecord) string {
	var b strings.Builder
	if r.IsStep {
		fmt.Fprintf(&b, "step=%d %-12s ", r.Step, "")
	} else {
		fmt.Fprintf(&b, "step=%d event=%-6d ", r.Step, r.Event)
	}
	b.WriteString(r.Text)
	return b.String()
}
