package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/skipprd/skipprd/sim"
)

// worldMarks are the marks the world counts of its own sources' rare
// paths (sim.Result.WorldMarks), each with the sources that can reach
// it. A mark is required of a sweep one of whose worlds has such a
// source, unless it is in optionalWorldMarks.
var worldMarks = []worldMark{
	{name: sim.MarkHTTPCSV, needs: csvClient},
	{name: sim.MarkHTTPCSVAsJSON, needs: csvClient},
	{name: sim.MarkHTTPExtraField, needs: func(s sim.SourceSpec) bool { return !s.Replayable && s.ExtraField }},
	{name: sim.MarkHTTPWidened, needs: func(s sim.SourceSpec) bool { return !s.Replayable && s.WidenField }},
	{name: sim.MarkHTTPRefused400, needs: refusingClient},
	{name: sim.MarkHTTPRefused415, needs: refusingClient},
	{name: sim.MarkHTTPRefused413, needs: cappedClient},
	{name: sim.MarkHTTPRefused413Chunked, needs: cappedClient},
	{name: sim.MarkIdemRetryGivenUp, needsWorld: func(s sim.WorldSpec) bool {
		return s.Engine.IdempotencyWindow <= 5*time.Minute && slices.ContainsFunc(s.AllSources(), keyedClient)
	}},
	{name: sim.MarkPrefixJSONL, needs: mixedObjects},
	{name: sim.MarkPrefixCSV, needs: mixedObjects},
	{name: sim.MarkPrefixRowGroups, needs: mixedObjects},
	{name: sim.MarkPrefixSpan, needs: mixedObjects},
	{name: sim.MarkPrefixMidObject, needs: mixedObjects},
	{name: sim.MarkPrefixResumed, needs: mixedObjects},
	{name: sim.MarkPrefixSkipped, needs: func(s sim.SourceSpec) bool { return s.Prefix && s.CorruptPermille > 0 }},
	{name: sim.MarkPrefixParallel, needs: func(s sim.SourceSpec) bool { return s.Prefix && s.InFlight > 1 }},
	{name: sim.MarkPrefixFloor, needs: floorSource},
	{name: sim.MarkPrefixFloorRecovered, needs: floorSource},
	{name: sim.MarkPrefixFloorSkipped, needs: func(s sim.SourceSpec) bool { return floorSource(s) && s.CorruptPermille > 0 }},
	{name: sim.MarkPrefixOnce, needs: func(s sim.SourceSpec) bool { return s.Prefix && s.Once }},
	{name: sim.MarkPrefixOnceStoreFailed, needs: func(s sim.SourceSpec) bool { return s.Prefix && s.Once }},
	{name: sim.MarkBrokerMultiRecord, needs: brokerSource},
	{name: sim.MarkBrokerResumeWaited, needsWorld: func(s sim.WorldSpec) bool {
		return s.Engine.Disk != nil && slices.ContainsFunc(s.AllSources(), brokerSource)
	}},
	{name: sim.MarkBrokerGapStopped, needs: func(s sim.SourceSpec) bool { return retention(s) && !s.Broker.OnGapSkip }},
	{name: sim.MarkBrokerGapSkipped, needs: func(s sim.SourceSpec) bool { return retention(s) && s.Broker.OnGapSkip }},
	{name: sim.MarkBrokerGapAtFetch, needs: retention},
	{name: sim.MarkBrokerStartRemoved, needs: retention},
	{name: sim.MarkBrokerPartitionAdd, needs: func(s sim.SourceSpec) bool { return s.Broker != nil && len(s.Broker.AddedPermille) > 0 }},
	{name: sim.MarkBrokerOutageRetried, needs: func(s sim.SourceSpec) bool { return s.Broker != nil && len(s.Broker.Outages) > 0 }},
	{name: sim.MarkCodecKafkaUnit, needs: func(s sim.SourceSpec) bool { return s.Codec == sim.CodecKafka }},
	{name: sim.MarkCodecNATSUnit, needs: func(s sim.SourceSpec) bool { return s.Codec == sim.CodecNATS }},
	{name: sim.MarkCodecSplit, needs: func(s sim.SourceSpec) bool { return s.Codec != "" && s.UnitRows > 0 && s.UnitRows < s.FetchMax }},
	{name: sim.MarkCodecGap, needs: func(s sim.SourceSpec) bool { return s.Codec != "" && retention(s) }},
	{name: sim.MarkMQTTUnit, needs: func(s sim.SourceSpec) bool { return s.Codec == sim.CodecMQTT }},
	{name: sim.MarkMQTTRedelivered, needs: func(s sim.SourceSpec) bool { return s.Codec == sim.CodecMQTT }},
	{name: sim.MarkPipelinesSharedNamespace, needsWorld: sim.WorldSpec.SharesNamespace},
	{name: sim.MarkPipelinesPowerLoss, needsWorld: func(s sim.WorldSpec) bool { return len(s.Pipelines) > 0 }},
}

// optionalWorldMarks are the world marks an ordinary sweep need not
// reach, each with why.
var optionalWorldMarks = map[string]string{
	sim.MarkHTTPCSVAsJSON: "a unit due as CSV whose every payload could read as a number: one of 8 characters or more " +
		"from 10 digits of 36 is one in 30,000, and a unit has several; sim TestRequestBodies checks the rule",
	sim.MarkBrokerGapStopped: "retention must outrun a consumer that crashed, waited or was refused: 10 of 17 worlds that can " +
		"of 200 seeds, too few for the sweep's 24; sim TestBrokerWorld forces it",
	sim.MarkBrokerGapSkipped: "as broker-gap-stopped: 14 of 22 worlds that can of 200 seeds; sim TestBrokerWorld forces it",
	sim.MarkBrokerGapAtFetch: "a gap met by a fetch rather than a resume: records read, refused for longer than the retention age, " +
		"then fetched again in the same run — 10 of 32 retention worlds of 200 seeds; sim TestBrokerFetchGap forces it",
	sim.MarkBrokerStartRemoved: "records of a partition read but never committed, then removed before any of it was: 5 of 32 " +
		"retention worlds of 200 seeds; sim TestBrokerWorld reaches it",
	sim.MarkCodecGap: "as broker-gap-stopped, for a source run by a real codec: 20 of 25 worlds that can of 200 seeds, " +
		"none of the 3 in the sweep's 24 at 60,000 steps; TestCodecWorlds forces it for Kafka and NATS, stop and skip",
	sim.MarkIdemRetryGivenUp: "a keyed unit left unanswered for half the idempotency window: a window of minutes " +
		"(30% of worlds) and an outage or restarts of a minute or more; sim TestKeyedSourceGivesUpAtHalfTheWindow checks the rule",
	sim.MarkPrefixFloorSkipped: "a floor rising over an object the source skipped needs a floor, unreadable objects and " +
		"a listing settle after one: 7 of 23 worlds that can of 200 seeds, " +
		"none of the 3 in the sweep's 24 at 60,000 steps; " +
		"TestPrefixFloorOverSkippedObjects forces it",
}

// worldMark is a world mark and the sources that can reach it (any
// pipeline's), or the worlds.
type worldMark struct {
	name       string
	needs      func(sim.SourceSpec) bool
	needsWorld func(sim.WorldSpec) bool
}

// possible reports whether a world of spec can reach the mark.
func (m worldMark) possible(spec sim.WorldSpec) bool {
	if m.needsWorld != nil {
		return m.needsWorld(spec)
	}
	return slices.ContainsFunc(spec.AllSources(), m.needs)
}

func csvClient(s sim.SourceSpec) bool {
	return !s.Replayable && (s.Encoding == sim.EncodingMixed3 || s.Encoding == sim.EncodingCSV)
}

// keyedClient: a source whose units carry idempotency keys (the HTTP
// client's and the MQTT source's), not offsets.
func keyedClient(s sim.SourceSpec) bool { return !s.Replayable && !s.Prefix && s.FetchMax == 0 }

func refusingClient(s sim.SourceSpec) bool { return !s.Replayable && s.RefusePermille > 0 }

func cappedClient(s sim.SourceSpec) bool { return refusingClient(s) && s.BodyCap > 0 }

func brokerSource(s sim.SourceSpec) bool { return s.FetchMax > 0 }

// retention: a broker source whose broker removes its oldest records.
func retention(s sim.SourceSpec) bool { return s.Broker != nil && s.Broker.RetentionAge > 0 }

func mixedObjects(s sim.SourceSpec) bool { return s.Prefix && s.Formats != "" }

// floorSource: a prefix source whose floor rises (a once run's never
// does: it lists each object once, never Settle apart).
func floorSource(s sim.SourceSpec) bool { return s.Prefix && s.OrderKeys && !s.Once }

// markCounts counts, per world mark, the worlds that could reach it,
// the worlds that did and the times it was passed.
type markCounts struct {
	possible, worlds map[string]int
	hits             map[string]uint64
}

func newMarkCounts() markCounts {
	return markCounts{possible: map[string]int{}, worlds: map[string]int{}, hits: map[string]uint64{}}
}

func (c markCounts) add(out outcome) {
	for _, m := range worldMarks {
		if m.possible(out.job.spec) {
			c.possible[m.name]++
		}
		if n := out.res.WorldMarks[m.name]; n > 0 {
			c.worlds[m.name]++
			c.hits[m.name] += n
		}
	}
}

// unreached lists the world marks some world could reach and none did;
// required, only those not optional.
func (c markCounts) unreached(required bool) []string {
	var out []string
	for _, m := range worldMarks {
		if _, optional := optionalWorldMarks[m.name]; c.possible[m.name] > 0 && c.worlds[m.name] == 0 && !(required && optional) {
			out = append(out, m.name)
		}
	}
	return out
}

func (c markCounts) print() {
	for _, m := range worldMarks {
		if c.possible[m.name] == 0 {
			continue
		}
		note := ""
		if _, ok := optionalWorldMarks[m.name]; ok {
			note = " (optional)"
		}
		fmt.Printf("  %-26s %5d %9d of %d worlds%s\n", m.name, c.worlds[m.name], c.hits[m.name], c.possible[m.name], note)
	}
}

// worldMarksSummary lists the world marks a run passed, in worldMarks
// order: " source_marks={http-csv=12 …}", or "" if none.
func worldMarksSummary(m map[string]uint64) string {
	names := make([]string, len(worldMarks))
	for i, w := range worldMarks {
		names[i] = w.name
	}
	return marksSummary("source_marks", names, m)
}
