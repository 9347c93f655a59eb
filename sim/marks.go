package sim

// World marks name the rare paths of the world's own sources — a CSV
// body, a request the HTTP source refused, an object resumed mid-way —
// counted as the engine counts its marks (engine/coverage.go), so that a
// sweep can tell which of them its worlds reached (Result.WorldMarks;
// cmd/simulate's coverage check). A mark never changes what a world does.
const (
	MarkHTTPCSV        = "http-csv"         // a CSV body answered 200
	MarkHTTPCSVAsJSON  = "http-csv-as-json" // a unit due as CSV whose payloads could all read as numbers, sent as JSON lines
	MarkHTTPExtraField = "http-extra-field" // a body with the extra field answered 200
	MarkHTTPWidened    = "http-widened"     // a body whose score widened to float64 answered 200
	MarkHTTPRefused400 = "http-refused-400" // an invalid first request refused 400 (malformed)
	MarkHTTPRefused415 = "http-refused-415" // refused 415 (unknown Content-Type)
	// MarkHTTPRefused413 and …Chunked: refused 413, over the body cap —
	// by its Content-Length, or (none sent) by the decoder reading past
	// the cap.
	MarkHTTPRefused413        = "http-refused-413"
	MarkHTTPRefused413Chunked = "http-refused-413-chunked"
	// MarkIdemRetryGivenUp: a keyed unit left unanswered for half the
	// idempotency window, no longer retried (source.giveUp).
	MarkIdemRetryGivenUp = "idem-retry-given-up"

	MarkPrefixJSONL     = "prefix-jsonl"      // a JSON-lines object ingested to its end
	MarkPrefixCSV       = "prefix-csv"        // a CSV object ingested to its end
	MarkPrefixRowGroups = "prefix-row-groups" // a Parquet object of several row groups ingested to its end
	MarkPrefixSpan      = "prefix-span"       // a unit of several row groups acked
	MarkPrefixMidObject = "prefix-mid-object" // a unit starting mid-object acked: an object in several units
	MarkPrefixResumed   = "prefix-resumed"    // such a unit where a recovery's offsets left the object: resumed mid-object
	MarkPrefixSkipped   = "prefix-skipped"    // an object that cannot be ingested skipped (on_error skip)
	// Objects at scale: several in flight, and a floor (order "keys").
	MarkPrefixParallel       = "prefix-parallel"        // a unit submitted while another object's is with the engine
	MarkPrefixFloor          = "prefix-floor"           // a unit carried a floor over objects done
	MarkPrefixFloorSkipped   = "prefix-floor-skipped"   // a floor rose over an object the source skipped
	MarkPrefixFloorRecovered = "prefix-floor-recovered" // a run started from recovered offsets holding a floor
	// Once runs (prefix_once.go).
	MarkPrefixOnce            = "prefix-once"              // a once run returned, everything its listing showed done
	MarkPrefixOnceStoreFailed = "prefix-once-store-failed" // a once run ended on a store error; the next went on
)

// Marks of worlds of several pipelines (pipeline.go).
const (
	MarkPipelinesSharedNamespace = "pipelines-shared-namespace" // a destination namespace held jobs of two pipelines
	MarkPipelinesPowerLoss       = "pipelines-power-loss"       // a power loss killed the processes of two pipelines
)

// mark counts one pass of a world mark.
func (w *World) mark(name string) {
	t := w.first() // a world's marks, whichever pipeline passed them
	if t.wmarks == nil {
		t.wmarks = map[string]uint64{}
	}
	t.wmarks[name]++
}
