package sim

import (
	"fmt"
	"strings"
	"time"
)

// pipelinesShare is the share of drawn worlds with sinks that run one or
// two further pipelines beside the first, writing the same sinks.
const pipelinesShare = 0.25

// drawPipelines draws one or two further pipelines for world s: each an
// engine of its own (S3 or disk WAL, sizes and limits drawn as the first
// pipeline's), sources of its own that write the world's sinks — plain
// namespaces shared with the other pipelines where the names meet (two
// pipelines' rows in one table or folder), CDC and prefix namespaces its
// own — and, half the time, a store of its own for its WAL.
func drawPipelines(r *Rand, s WorldSpec) []PipelineSpec {
	n := 1
	if r.Chance(0.3) {
		n = 2
	}
	reserved := map[string]bool{} // namespaces a CDC or prefix source of an earlier pipeline owns
	for _, src := range s.Sources {
		if src.CDC || src.Prefix {
			reserved[src.Name] = true
		}
	}
	out := make([]PipelineSpec, n)
	for i := range out {
		out[i] = drawPipeline(r.Split(fmt.Sprintf("pipeline/%d", i)), s, i+2, reserved)
	}
	return out
}

func drawPipeline(r *Rand, s WorldSpec, n int, reserved map[string]bool) PipelineSpec {
	p := PipelineSpec{Engine: drawEngine(r.Split("engine")), OwnStore: r.Chance(0.5)}
	name := fmt.Sprintf("%s%d", s.Engine.Pipeline, n)
	if p.OwnStore && r.Split("same-name").Chance(0.5) {
		// A fleet on the default pipeline name: hosts with WALs of their
		// own under one name, one destination.
		name = s.Engine.Pipeline
	}
	p.Engine.Pipeline = name
	if g := r.Split("recovery-give-up"); g.Chance(0.3) {
		p.Engine.RecoveryGiveUp = g.Duration(2*time.Second, 30*time.Second)
	}
	if d := r.Split("disk-wal"); d.Chance(diskWALShare) {
		p.Engine.Disk = drawDiskWAL(d)
		if k := r.Split("kill-only"); k.Chance(0.5) {
			p.KillOnly = k.Float64() / 2
		}
	}
	target := p.Engine.TargetBytes
	p.MemoryBytes = max(int64(logUniform(r, 1.2*float64(target), 40*float64(target))), memoryFloor)
	own := s
	own.Engine = p.Engine
	bulk := false
	for _, src := range drawSources(r.Split("sources"), own) {
		if strings.HasPrefix(src.Name, "bulk") {
			if bulk || !r.Chance(0.3) {
				continue // production-size loads are mostly the first pipeline's: one at most here
			}
			bulk = true
		}
		if src.CDC || src.Prefix || reserved[src.Name] {
			src.Name += fmt.Sprintf("_p%d", n) // a table or landing prefix of its own
		}
		if src.CDC || src.Prefix {
			reserved[src.Name] = true
		}
		p.Sources = append(p.Sources, src)
	}
	return p
}

func (p PipelineSpec) summary() string {
	var srcs []string
	for _, src := range p.Sources {
		srcs = append(srcs, src.summary())
	}
	store := "shared"
	if p.OwnStore {
		store = "own"
	}
	return fmt.Sprintf("pipeline[%s wal=%s store=%s target=%s part=%s memory=%s sources=[%s]]", p.Engine.Pipeline,
		walSummary(p.Engine.Disk), store, mib(p.Engine.TargetBytes), mib(p.Engine.PartBytes), mib(p.MemoryBytes), strings.Join(srcs, " "))
}

// AllSources returns the sources of every pipeline of the world, the
// first pipeline's first.
func (s WorldSpec) AllSources() []SourceSpec {
	out := append([]SourceSpec(nil), s.Sources...)
	for _, p := range s.Pipelines {
		out = append(out, p.Sources...)
	}
	return out
}

// SharesNamespace reports whether two pipelines of the world write one
// namespace of one sink (their rows side by side in one table or folder).
func (s WorldSpec) SharesNamespace() bool {
	owner := map[[2]string]int{} // (sink, namespace) → pipeline index + 1
	for i, srcs := range append([][]SourceSpec{s.Sources}, pipelineSources(s.Pipelines)...) {
		for _, src := range srcs {
			k := [2]string{src.sinkRef(), src.Name}
			if o := owner[k]; o != 0 && o != i+1 {
				return true
			}
			owner[k] = i + 1
		}
	}
	return false
}

func pipelineSources(ps []PipelineSpec) [][]SourceSpec {
	out := make([][]SourceSpec, len(ps))
	for i, p := range ps {
		out[i] = p.Sources
	}
	return out
}
