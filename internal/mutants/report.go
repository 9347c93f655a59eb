package mutants

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteReport prints the results as a Markdown table, then the kill rate
// and the survivors with the rule each one breaks.
func WriteReport(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| mutant | where | rule | result | seed | how | time |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	var total time.Duration
	for _, r := range results {
		total += r.Elapsed
		seed := "—"
		if r.Seed != 0 {
			seed = fmt.Sprint(r.Seed)
		}
		how := r.How
		if r.Status == Survived {
			how = fmt.Sprintf("%d seeds × %s steps, profile %s: all passed", r.Seeds, r.Iters, r.Faults)
		}
		fmt.Fprintf(w, "| %s | %s:%d | %s | %s | %s | %s | %v |\n", r.Mutant.ID, r.Mutant.File, r.Line,
			ruleName(r.Mutant.Rule), r.Status, seed, cell(how), r.Elapsed.Round(time.Second))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, Summary(results))
	fmt.Fprintf(w, "total time %v\n", total.Round(time.Second))
	var survivors []Result
	for _, r := range results {
		if !r.Status.IsKill() {
			survivors = append(survivors, r)
		}
	}
	if len(survivors) == 0 {
		return
	}
	fmt.Fprintln(w, "\nnot killed:")
	for _, r := range survivors {
		fmt.Fprintf(w, "  %s %s (%s:%d)\n    %s\n", r.Status, r.Mutant.ID, r.Mutant.File, r.Line, r.Mutant.Rule)
		if r.Status == Invalid {
			fmt.Fprintf(w, "    %s\n", r.How)
		}
	}
}

// Summary is the kill-rate line: killed / total, and how they died.
func Summary(results []Result) string {
	var by [len(statusNames)]int
	killed := 0
	for _, r := range results {
		by[r.Status]++
		if r.Status.IsKill() {
			killed++
		}
	}
	rate := 0.0
	if len(results) > 0 {
		rate = 100 * float64(killed) / float64(len(results))
	}
	return fmt.Sprintf("kill rate: %d/%d (%.0f%%) — by a seed's violation or panic %d, crash %d, timeout %d, build %d; survived %d; invalid %d",
		killed, len(results), rate, by[Killed], by[KilledCrash], by[KilledTimeout], by[KilledBuild], by[Survived], by[Invalid])
}

// ruleName is the rule line up to its explanation: "§2.2 No ACK of a maybe".
func ruleName(rule string) string {
	name, _, _ := strings.Cut(rule, " — ")
	return name
}

// cell makes text safe for one Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
