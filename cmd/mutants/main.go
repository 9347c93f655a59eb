package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/skipprd/skipprd/internal/mutants"
)

func main() {
	o := mutants.Defaults
	var only, report string
	flag.StringVar(&o.Root, "root", ".", "repository root")
	flag.StringVar(&o.File, "file", "internal/mutants/mutants.txt", "the mutants data file")
	flag.StringVar(&only, "only", "", "comma-separated mutant ids to run (default: all)")
	flag.IntVar(&o.Force, "seeds", 0, fmt.Sprintf("seeds for every mutant, overriding the data file (1..%d; default: the file's, else %d)", mutants.SeedsMax, o.Seeds))
	flag.StringVar(&o.Iters, "iters", o.Iters, "steps per world")
	flag.DurationVar(&o.PerSeed, "per-seed", o.PerSeed, "time budget per seed before a sweep counts as hung (shared among the cores)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the scratch directory")
	flag.StringVar(&report, "report", "", "also write the final report to this file")
	flag.Parse()
	if o.Force < 0 || o.Force > mutants.SeedsMax {
		fmt.Fprintf(os.Stderr, "mutants: -seeds %d: want 1..%d\n", o.Force, mutants.SeedsMax)
		os.Exit(2)
	}
	if only != "" {
		o.Only = strings.Split(only, ",")
	}
	o.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	results, err := mutants.Run(ctx, o)
	if err != nil && len(results) == 0 {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(2)
	}
	fmt.Println()
	mutants.WriteReport(os.Stdout, results)
	fmt.Printf("wall time %v\n", time.Since(start).Round(time.Second))
	if report != "" {
		f, err := os.Create(report)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutants:", err)
			os.Exit(2)
		}
		mutants.WriteReport(f, results)
		f.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mutants: stopped after %d mutants: %v\n", len(results), err)
		os.Exit(2)
	}
	for _, r := range results {
		if !r.Status.IsKill() {
			os.Exit(1)
		}
	}
}
