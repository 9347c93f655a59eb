package main

import (
	"fmt"

	"github.com/skipprd/skipprd/engine"
)

// coverage counts, for each mark, the worlds that reached it and the
// times it was passed in all.
type coverage struct {
	worlds [engine.NumMarks]int
	hits   engine.Marks
	runs   int
}

func coverageOf(outs []outcome) coverage {
	var c coverage
	for _, out := range outs {
		c.runs++
		c.hits.Add(out.res.Marks)
		for m, n := range out.res.Marks {
			if n > 0 {
				c.worlds[m]++
			}
		}
	}
	return c
}

// unreached lists the marks no world reached.
func (c coverage) unreached() []engine.Mark {
	var out []engine.Mark
	for m := range engine.NumMarks {
		if c.worlds[m] == 0 {
			out = append(out, m)
		}
	}
	return out
}

func printCoverage(outs []outcome) {
	c := coverageOf(outs)
	fmt.Printf("coverage over %d worlds (mark: worlds that reached it, times passed):\n", c.runs)
	for m := range engine.NumMarks {
		fmt.Printf("  %-26s %5d %9d\n", m, c.worlds[m], c.hits[m])
	}
	un := c.unreached()
	if len(un) == 0 {
		fmt.Println("every mark was reached")
		return
	}
	fmt.Printf("%d marks no world reached:", len(un))
	for _, m := range un {
		fmt.Printf(" %s", m)
	}
	fmt.Println()
}
