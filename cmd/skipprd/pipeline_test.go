package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

const examplePath = "../../skipprd.example.yaml"

// doc joins lines into a file, so a case's line numbers are its indexes
// plus one.
func doc(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// writePipeline writes text to skipprd.yaml in a fresh directory.
func writePipeline(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "skipprd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pipelineErrors splits err into its *pipelineErrors, failing on any
// other kind.
func pipelineErrors(t *testing.T, err error) []*pipelineError {
	t.Helper()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("want errors.Join of *pipelineError, got %T: %v", err, err)
	}
	var pes []*pipelineError
	for _, e := range joined.Unwrap() {
		pe, ok := e.(*pipelineError)
		if !ok {
			t.Fatalf("want *pipelineError, got %T: %v", e, e)
		}
		pes = append(pes, pe)
	}
	return pes
}

// errorLines loads text and returns its error messages, the file named
// skipprd.yaml.
func errorLines(t *testing.T, text string) []string {
	t.Helper()
	path := writePipeline(t, text)
	p, err := loadPipeline(path)
	if err == nil {
		t.Fatalf("accepted: %+v", p)
	}
	var lines []string
	for _, pe := range pipelineErrors(t, err) {
		if pe.Path != path {
			t.Errorf("error names %q, want %q", pe.Path, path)
		}
		lines = append(lines, strings.Replace(pe.Error(), path, "skipprd.yaml", 1))
	}
	return lines
}

func mustLoad(t *testing.T, path string) *pipelineFile {
	t.Helper()
	p, err := loadPipeline(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

func TestPipelineExample(t *testing.T) {
	p := mustLoad(t, examplePath)
	if got := sinkNames(p); !slices.Equal(got, []string{"lake"}) {
		t.Errorf("sinks %v", got)
	}
	if len(p.Sources) != 2 || p.Sources[0].HTTP == nil || p.Sources[1].Files == nil {
		t.Fatalf("sources %+v", p.Sources)
	}
	if got, want := p.Sources[1].Files.Path, filepath.Join("../..", "incoming"); got != want {
		t.Errorf("files path %q, want %q (against the file's directory)", got, want)
	}
}

// TestPipelineExampleReference uncomments the example's reference block
// and requires it to load, to name every key the parser knows, and to
// show the parser's defaults where it says "default".
func TestPipelineExampleReference(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	text := uncommentReference(t, string(data))
	p := mustLoad(t, writePipeline(t, text))

	var root yaml.Node
	if err := yaml.Unmarshal([]byte(text), &root); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	collectKeys(&root, keys)
	all := slices.Concat(topKeys, settingsKeys, namespaceKeys,
		allKeys(sinkCommon, sinkKinds, sinkKeys), allKeys(sourceCommon, sourceKinds, sourceKeys))
	for _, k := range all {
		if !keys[k] {
			t.Errorf("the reference never shows key %q", k)
		}
	}
	kinds := map[string]bool{}
	for _, s := range p.Sources {
		kinds[s.Kind] = true
	}
	for _, s := range p.Sinks {
		kinds[s.Kind] = true
	}
	for _, k := range slices.Concat(sinkKinds, sourceKinds) {
		if !kinds[k] {
			t.Errorf("the reference never shows kind %q", k)
		}
	}

	src := map[string]sourceSpec{}
	for _, s := range p.Sources {
		src[s.Kind] = s
	}
	if h := src[sourceHTTP].HTTP; h.Listen != defaultListen || h.BodyMaxBytes != defaultBodyMax {
		t.Errorf("http listen %q, body %d; the defaults are %q, %d", h.Listen, h.BodyMaxBytes, defaultListen, defaultBodyMax)
	}
	if f := src[sourceFiles].Files; f.Poll != defaultFilesPoll || f.Format != defaultFormat || f.OnError != defaultOnError {
		t.Errorf("files %+v: the defaults are %v, %s, %s", f, defaultFilesPoll, defaultFormat, defaultOnError)
	}
	if o := src[sourceObjects].Objects; o.Poll != defaultObjectsPoll || o.Format != defaultFormat || o.OnError != defaultOnError {
		t.Errorf("objects %+v: the defaults are %v, %s, %s", o, defaultObjectsPoll, defaultFormat, defaultOnError)
	}
	for _, s := range p.Sinks {
		wantBytes := int64(defaultLakeFileBytes)
		if s.Kind == sinkPostgres {
			wantBytes = 0
		}
		if l := s.Lanes; !l.FileBytesSet || !l.FlushIntervalSet || l.FileBytes != wantBytes || l.FlushInterval != defaultFlushInterval {
			t.Errorf("sink %s lanes %+v: the defaults are %d, %v", s.Name, l, wantBytes, defaultFlushInterval)
		}
	}
	if p.Settings.WALStorage != string(walDisk) || filepath.Base(p.Settings.DataDir) != filepath.Base(defaultDataDir) {
		t.Errorf("settings %+v: the defaults are %s, %s", p.Settings, walDisk, defaultDataDir)
	}
}

// uncommentReference is the example's block after the reference marker,
// each line without its first "# ".
func uncommentReference(t *testing.T, text string) string {
	t.Helper()
	_, block, ok := strings.Cut(text, "# ---- reference")
	if !ok {
		t.Fatal("no reference marker in the example")
	}
	var b strings.Builder
	for _, line := range strings.Split(block, "\n")[1:] {
		if line != "" && line != "#" && !strings.HasPrefix(line, "# ") {
			t.Fatalf("reference line %q is not commented", line)
		}
		b.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	return b.String()
}

// collectKeys gathers every mapping key under n, except sink and
// namespace names (the values of sinks and namespaces).
func collectKeys(n *yaml.Node, keys map[string]bool) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			keys[k] = true
			if (k == "sinks" || k == "namespaces") && v.Kind == yaml.MappingNode {
				for j := 1; j < len(v.Content); j += 2 {
					collectKeys(v.Content[j], keys)
				}
				continue
			}
			collectKeys(v, keys)
		}
		return
	}
	for _, c := range n.Content {
		collectKeys(c, keys)
	}
}

func sinkNames(p *pipelineFile) []string {
	var names []string
	for _, s := range p.Sinks {
		names = append(names, s.Name)
	}
	return names
}

// TestPipelineParsed checks what a full file becomes: sorted sinks and
// namespaces, defaults, resolved paths.
func TestPipelineParsed(t *testing.T) {
	path := writePipeline(t, doc(
		"settings: {data_dir: data, wal_storage: embedded}",
		"sinks:",
		"  zeta: {kind: parquet-s3, bucket: my-bucket, prefix: out/, file_bytes: 16MiB, flush_interval: 90s}",
		"  alpha: {kind: parquet-dir, path: /srv/lake}",
		"sources:",
		"  - name: web",
		"    kind: http",
		"    sink: alpha",
		"    listen: '[::1]:0'",
		"    token_env: WEB_TOKEN",
		"    body_max_bytes: 1 MB",
		"    namespaces:",
		"      zz: {sink: zeta, at_least_once: true}",
		"      aa:",
		"  - {name: in, kind: files, path: /abs/in, namespace: n1, sink: alpha}",
		"  - {name: s3, kind: objects, bucket: 2024, namespace: n2, sink: alpha, format: csv, poll: 1m, on_error: skip, order: keys, settle: 5m, in_flight: 16}",
		"  - {name: gen, kind: generator, sink: zeta}",
	))
	p := mustLoad(t, path)
	dir := filepath.Dir(path)
	want := &pipelineFile{
		Path:     path,
		Settings: settingsSpec{DataDir: filepath.Join(dir, "data"), WALStorage: "embedded"},
		Sinks: []sinkSpec{
			{Name: "alpha", Kind: sinkParquetDir, Path: "/srv/lake", Line: 4},
			{Name: "zeta", Kind: sinkParquetS3, Bucket: "my-bucket", Prefix: "out/", Line: 3, Lanes: laneSpec{
				FileBytes: 16 << 20, FileBytesSet: true, FlushInterval: 90 * time.Second, FlushIntervalSet: true, FlushLine: 3}},
		},
		Sources: []sourceSpec{
			{Name: "web", Kind: sourceHTTP, Sink: "alpha", Line: 6, HTTP: &httpSourceSpec{
				Listen: "[::1]:0", TokenEnv: "WEB_TOKEN", BodyMaxBytes: 1_000_000,
				Namespaces: []namespaceSpec{{Name: "aa", Sink: "alpha", Line: 14}, {Name: "zz", Sink: "zeta", AtLeastOnce: true, Line: 13}},
			}},
			{Name: "in", Kind: sourceFiles, Sink: "alpha", Line: 15, Files: &filesSourceSpec{
				Path: "/abs/in", pollSpec: pollSpec{Namespace: "n1", Format: "auto", Poll: 2 * time.Second, OnError: "stop",
					Order: "any", Settle: time.Minute, InFlight: 4}}},
			{Name: "s3", Kind: sourceObjects, Sink: "alpha", Line: 16, Objects: &objectsSourceSpec{
				Bucket: "2024", pollSpec: pollSpec{Namespace: "n2", Format: "csv", Poll: time.Minute, OnError: "skip",
					Order: "keys", Settle: 5 * time.Minute, InFlight: 16}}},
			{Name: "gen", Kind: sourceGenerator, Sink: "zeta", Line: 17, Generator: true},
		},
	}
	if got, wantS := spew(p), spew(want); got != wantS {
		t.Errorf("got\n%s\nwant\n%s", got, wantS)
	}
	if s, ok := p.sink("zeta"); !ok || s.Bucket != "my-bucket" {
		t.Errorf("sink(zeta) = %+v, %v", s, ok)
	}
	if _, ok := p.sink("nope"); ok {
		t.Error("sink(nope) found")
	}
	if got := p.Sinks[0].dir("/data"); got != "/srv/lake" {
		t.Errorf("absolute dir: %q", got)
	}
}

// spew prints a pipelineFile with its pointers followed.
func spew(p *pipelineFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%+v\n%+v\n", p.Path, p.Settings, p.Sinks)
	for _, s := range p.Sources {
		fmt.Fprintf(&b, "%s %s %s %d generator=%v", s.Name, s.Kind, s.Sink, s.Line, s.Generator)
		for _, v := range []any{s.HTTP, s.Files, s.Objects} {
			if !reflect.ValueOf(v).IsNil() {
				fmt.Fprintf(&b, " %+v", reflect.ValueOf(v).Elem().Interface())
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestPipelineDefault(t *testing.T) {
	p := defaultPipelineFile()
	s, ok := p.sink(lakeSinkRef)
	if !ok || s.Kind != sinkIceberg || s.dir("/d") != filepath.Join("/d", lakeDir) || s.Iceberg.Namespace != "skipprd" || s.Iceberg.CatalogURLEnv != "" {
		t.Errorf("default sink %+v %v", s, ok)
	}
	if s.Iceberg.SmallFiles != iceberg.SmallFilesDefault.MinFiles || smallFiles(s.Iceberg.SmallFiles) != (iceberg.SmallFiles{MinFiles: 8}) {
		t.Errorf("default small files %d", s.Iceberg.SmallFiles)
	}
	if smallFiles(0).Every >= 0 {
		t.Error("small_files: 0 rewrites")
	}
	if len(p.Sources) != 1 || !p.Sources[0].Generator || p.Sources[0].Sink != lakeSinkRef {
		t.Errorf("default sources %+v", p.Sources)
	}
}

// TestPipelineErrors: one case per error class, each message checked
// whole, line included.
func TestPipelineErrors(t *testing.T) {
	const sinks = "sinks: {lake: {kind: parquet-dir, path: lake}}"
	gen := func(name string) string { return "  - {name: " + name + ", kind: generator, sink: lake}" }
	for _, tc := range []struct {
		name string
		text string
		want []string
	}{
		// The file and its syntax.
		{"empty", "", []string{"skipprd.yaml: the file is empty; want sinks and sources (see skipprd.example.yaml)"}},
		{"comments only", "# nothing\n", []string{"skipprd.yaml: the file is empty; want sinks and sources (see skipprd.example.yaml)"}},
		{"document is null", "---\n", []string{
			"skipprd.yaml:2: top level: sinks is required: at least one sink, e.g. lake: {kind: parquet-dir, path: lake}",
			"skipprd.yaml:2: top level: sources is required: at least one source, e.g. - {name: api, kind: http, sink: lake}"}},
		{"syntax", doc(sinks, "sources:", "  - {name: a, kind: generator, sink: lake", "x: 1"), []string{
			"skipprd.yaml:3: did not find expected ',' or '}'"}},
		{"syntax on line 1", "sinks: a: b\n", []string{"skipprd.yaml:1: mapping values are not allowed in this context"}},
		{"tab", doc(sinks, "sources:", "\t- x"), []string{
			"skipprd.yaml:3: found character that cannot start any token (YAML indents with spaces only, never tabs)"}},
		{"unknown alias", doc(sinks, "sources:", "  - *gen"), []string{
			"skipprd.yaml:3: alias *gen refers to no anchor &gen defined before it"}},
		{"two documents", doc(sinks, "sources: [{name: a, kind: generator, sink: lake}]", "---", "sinks: {}"), []string{
			"skipprd.yaml:3: a second YAML document (after ---); want one"}},
		{"not a mapping", "- a\n", []string{
			"skipprd.yaml:1: top level: want a mapping with settings, sinks and sources, found a list"}},
		{"duplicate key", doc("sinks:", "  lake: {kind: parquet-dir, path: lake}", "  lake: {kind: parquet-dir, path: lake2}", "sources:", gen("a")), []string{
			`skipprd.yaml:3: sinks: key "lake" is already set on line 2`}},
		{"duplicate namespace", doc(sinks, "sources:", "  - name: a", "    kind: http", "    sink: lake", "    namespaces:", "      ev: {}", "      ev: {}"), []string{
			`skipprd.yaml:8: sources[0] "a" namespaces: key "ev" is already set on line 7`}},
		{"merge key", doc("base: &b {kind: parquet-dir}", sinks, "sources:", "  - {<<: *b, name: a, kind: generator, sink: lake}"), []string{
			`skipprd.yaml:1: top level: unknown key "base" (allowed: settings, sinks, sources)`,
			`skipprd.yaml:4: sources[0]: merge keys (<<) are not supported; write the keys out`}},

		// Unknown keys, and keys of another kind.
		{"unknown top key", doc(sinks, "sources:", gen("a"), "sink: lake"), []string{
			`skipprd.yaml:4: top level: unknown key "sink" (allowed: settings, sinks, sources)`}},
		{"unknown settings key", doc("settings:", "  datadir: x", sinks, "sources:", gen("a")), []string{
			`skipprd.yaml:2: settings: unknown key "datadir" (allowed: data_dir, wal_storage)`}},
		{"unknown sink key", doc("sinks:", "  lake: {kind: parquet-dir, paht: lake}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": unknown key "paht" (allowed: kind, path, file_bytes, flush_interval)`,
			`skipprd.yaml:2: sink "lake": path is required (a directory; relative to DATA_DIR, e.g. lake)`}},
		{"key of another sink kind", doc("sinks:", "  lake:", "    kind: parquet-dir", "    path: lake", "    bucket: b1", "sources:", gen("a")), []string{
			`skipprd.yaml:5: sink "lake": key "bucket" is for kind parquet-s3, not parquet-dir (kind parquet-dir takes: kind, path, file_bytes, flush_interval)`}},
		{"key of another source kind", doc(sinks, "sources:", "  - name: a", "    kind: http", "    sink: lake", "    poll: 1s"), []string{
			`skipprd.yaml:6: sources[0] "a": key "poll" is for kind files or objects, not http (kind http takes: name, kind, sink, listen, token_env, body_max_bytes, namespaces)`}},
		{"unknown source key", doc(sinks, "sources:", "  - {name: a, kind: generator, sink: lake, rate: 5}"), []string{
			`skipprd.yaml:3: sources[0] "a": unknown key "rate" (allowed: name, kind, sink)`}},
		{"unknown key, unknown kind", doc(sinks, "sources:", "  - {name: a, kind: pulsar, sink: lake, topic: t}"), []string{
			`skipprd.yaml:3: sources[0] "a": kind "pulsar" is not one of http, files, objects, generator, postgres-cdc, kafka, nats, mqtt`,
			`skipprd.yaml:3: sources[0] "a": unknown key "topic" (allowed: name, kind, sink, listen, token_env, body_max_bytes, namespaces, path, namespace, format, poll, on_error, order, settle, in_flight, bucket, prefix, url_env, publication, slot, tables, brokers, topics, topic_regex, group, start, on_gap, read_committed, tls, sasl_mechanism, sasl_user_env, sasl_password_env, url, stream, subjects, creds_file, username_env, password_env, broker, id_field)`}},
		{"mqtt", doc(sinks, "sources:", "  - {name: a, kind: mqtt, sink: lake, broker: '127.0.0.1:1883', topics: ['a/#/b', 'c/d+'], namespace: readings, format: text, id_field: id}",
			"  - {name: b, kind: mqtt, sink: lake, broker: 'tcp://x:1883', topics: [a]}"), []string{
			`skipprd.yaml:3: sources[0] "a": broker "127.0.0.1:1883": want scheme://host:port, e.g. tcp://127.0.0.1:1883`,
			`skipprd.yaml:3: sources[0] "a": topics: "a/#/b": topic filter "a/#/b": '#' only as the whole last level`,
			`skipprd.yaml:3: sources[0] "a": topics: "c/d+": topic filter "c/d+": '+' only as a whole level`,
			`skipprd.yaml:3: sources[0] "a": id_field "id" needs format json`,
			`skipprd.yaml:4: sources[1] "b": namespace is required (the namespace every row goes to, e.g. drops)`}},
		{"nats", doc(sinks, "sources:", "  - {name: a, kind: nats, sink: lake, url: 'http://x:4222', stream: 'my.stream', start: latest}",
			"  - {name: b, kind: nats, sink: lake, url: 'nats://x:4222', stream: Clicks}", "  - {name: c, kind: nats, sink: lake, url: 'nats://x:4222', stream: C2, namespace: clicks}",
			"  - {name: d, kind: nats, sink: lake}"), []string{
			`skipprd.yaml:3: sources[0] "a": url "http://x:4222": want nats://host:port (or tls://host:port)`,
			`skipprd.yaml:3: sources[0] "a": stream "my.stream": 1 to 255 characters, none of space . * > / \`,
			`skipprd.yaml:3: sources[0] "a": start "latest" is not one of first, new`,
			`skipprd.yaml:5: sources[2] "c": namespace "clicks" of sink "lake" is already written by sources[1] "b" (line 4); give one of them another namespace or sink`,
			`skipprd.yaml:6: sources[3] "d": url is required (the server, e.g. nats://127.0.0.1:4222)`,
			`skipprd.yaml:6: sources[3] "d": stream is required (a JetStream stream name, e.g. ORDERS)`}},
		{"nats credentials", doc(sinks, "sources:", "  - {name: a, kind: nats, sink: lake, url: 'nats://x:4222', stream: A, username_env: NATS_USER}",
			"  - {name: b, kind: nats, sink: lake, url: 'nats://x:4222', stream: B, creds_file: /etc/loader.creds, token_env: 'nats token'}",
			"  - {name: c, kind: nats, sink: lake, url: 'nats://x:4222', stream: C, token_env: NATS_TOKEN, username_env: U, password_env: P}"), []string{
			`skipprd.yaml:3: sources[0] "a": username_env and password_env go together`,
			`skipprd.yaml:4: sources[1] "b": token_env "nats token": want an environment variable's name (A-Z, 0-9, _; not starting with a digit), e.g. NATS_TOKEN`,
			`skipprd.yaml:4: sources[1] "b": creds_file, username_env/password_env and token_env: at most one`,
			`skipprd.yaml:5: sources[2] "c": creds_file, username_env/password_env and token_env: at most one`}},
		{"kafka", doc(sinks, "sources:", "  - {name: a, kind: kafka, sink: lake, brokers: [k1, 'k2:9092', k2:9092], topics: [orders, 'bad topic', 9s], format: avro, sasl_mechanism: plain}",
			"  - {name: b, kind: kafka, sink: lake, brokers: k1:9092}", "  - {name: c, kind: kafka, sink: lake, brokers: [k:1], topics: [Orders]}"), []string{
			`skipprd.yaml:3: sources[0] "a": brokers: "k1": want host:port, e.g. kafka-1:9092`,
			`skipprd.yaml:3: sources[0] "a": brokers: "k2:9092" is listed twice`,
			`skipprd.yaml:3: sources[0] "a": topics: "bad topic": topic "bad topic": character ' '; Kafka allows letters, digits and . _ - only`,
			`skipprd.yaml:3: sources[0] "a": format "avro" is not one of json, text, bytes`,
			`skipprd.yaml:3: sources[0] "a": sasl_user_env is required (an environment variable's name, e.g. KAFKA_USER)`,
			`skipprd.yaml:3: sources[0] "a": sasl_password_env is required (an environment variable's name, e.g. KAFKA_PASSWORD)`,
			`skipprd.yaml:4: sources[1] "b": brokers: want a list of host:port of one or more brokers, e.g. [kafka-1:9092, kafka-2:9092], found "k1:9092"`,
			`skipprd.yaml:4: sources[1] "b": topics is missing: want topic names, e.g. [orders, payments], or a topic_regex`,
			`skipprd.yaml:5: sources[2] "c": namespace "orders" of sink "lake" is already written by sources[0] "a" (line 3); give one of them another namespace or sink`}},
		{"kafka topic_regex and group", doc(sinks, "sources:",
			"  - {name: a, kind: kafka, sink: lake, brokers: [k:1], topics: [orders], topic_regex: 'shop\\..*'}",
			"  - {name: b, kind: kafka, sink: lake, brokers: [k:1], topic_regex: 'shop.('}",
			"  - {name: c, kind: kafka, sink: lake, brokers: [k:1], topic_regex: 'x.*', group: ''}",
			"  - {name: d, kind: kafka, sink: lake, brokers: [k:1], topic_regex: ''}",
			"  - {name: e, kind: kafka, sink: lake, brokers: [k:1], topics: [e1], group: 'my group'}",
			"  - {name: f, kind: kafka, sink: lake, brokers: [k:1], topic_regex: 'shop\\..*', group: skipprd-shop}"), []string{
			`skipprd.yaml:3: sources[0] "a": topics and topic_regex: give one, not both`,
			"skipprd.yaml:4: sources[1] \"b\": topic_regex \"shop.(\": error parsing regexp: missing closing ): `shop.(`",
			`skipprd.yaml:5: sources[2] "c": group is empty; give a consumer group id, e.g. skipprd-orders, or remove the key for the default`,
			`skipprd.yaml:6: sources[3] "d": topic_regex is empty; give a regular expression matching whole topic names, e.g. 'shop\..*'`,
			`skipprd.yaml:7: sources[4] "e": group "my group": character ' '; want printable characters without spaces`}},
		{"unknown namespace key", doc(sinks, "sources:", "  - name: a", "    kind: http", "    sink: lake", "    namespaces:", "      ev: {sink: lake, once: true}"), []string{
			`skipprd.yaml:7: sources[0] "a" namespace "ev": unknown key "once" (allowed: sink, at_least_once)`}},

		// Wrong YAML types.
		{"sinks is a list", doc("sinks:", "  - lake", "sources:", gen("a")), []string{
			"skipprd.yaml:2: sinks: want a mapping of sink name to sink, e.g. lake: {kind: parquet-dir, path: lake}, found a list"}},
		{"sources is a mapping", doc(sinks, "sources:", "  a: {kind: generator}"), []string{
			"skipprd.yaml:3: sources: want a list of sources (- name: …), found a mapping"}},
		{"source is text", doc(sinks, "sources:", "  - a"), []string{
			`skipprd.yaml:3: sources[0]: want a mapping with name, kind and sink, found "a"`}},
		{"sink is text", doc("sinks:", "  lake: parquet-dir", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": want a mapping with kind and its fields, found "parquet-dir"`}},
		{"settings is text", doc("settings: disk", sinks, "sources:", gen("a")), []string{
			`skipprd.yaml:1: settings: want a mapping of data_dir and wal_storage, found "disk"`}},
		{"bool is text", doc(sinks, "sources:", "  - name: a", "    kind: http", "    sink: lake", "    namespaces:", "      ev: {at_least_once: yes}"), []string{
			`skipprd.yaml:7: sources[0] "a" namespace "ev": at_least_once: want true or false, found "yes"`}},
		{"text is a list", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: [a, b]}"), []string{
			`skipprd.yaml:3: sources[0] "a": listen: want text, found a list`}},
		{"namespaces is a list", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, namespaces: [ev]}"), []string{
			`skipprd.yaml:3: sources[0] "a" namespaces: want a mapping of namespace to {sink: …, at_least_once: …}, found a list`}},

		// Names.
		{"bad sink name", doc("sinks:", "  Lake: {kind: parquet-dir, path: lake}", "sources:", "  - {name: a, kind: generator, sink: Lake}"), []string{
			`skipprd.yaml:2: sink "Lake": a sink name must be a lower-case letter, then up to 62 of a-z, 0-9, _ and -`}},
		{"bad source name", doc(sinks, "sources:", "  - {name: my api, kind: generator, sink: lake}"), []string{
			`skipprd.yaml:3: sources[0]: name "my api": want a lower-case letter, then up to 62 of a-z, 0-9, _ and -`}},
		{"duplicate source name", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake}", "  - {name: a, kind: http, sink: lake, listen: ':9000'}"), []string{
			`skipprd.yaml:4: sources[1] "a": name "a" is already the name of the source on line 3; source names must be unique`}},
		{"bad http namespace", doc(sinks, "sources:", "  - name: a", "    kind: http", "    sink: lake", "    namespaces: {Ev: {}}"), []string{
			`skipprd.yaml:6: sources[0] "a": namespace "Ev": only a lower-case letter followed by lower-case letters, digits and underscores`}},
		{"bad files namespace", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake, path: in, namespace: my-drops}"), []string{
			`skipprd.yaml:3: sources[0] "a": namespace "my-drops": only a lower-case letter followed by lower-case letters, digits and underscores`}},

		// Kinds and required fields.
		{"missing kind", doc("sinks:", "  lake: {path: lake}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": kind is required (parquet-dir, parquet-s3, postgres, iceberg)`}},
		{"bad sink kind", doc("sinks:", "  lake: {kind: parquet, path: lake}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": kind "parquet" is not one of parquet-dir, parquet-s3, postgres, iceberg`}},
		{"parquet-s3 needs bucket", doc("sinks:", "  lake: {kind: parquet-s3, prefix: x/}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": bucket is required (an S3 bucket name)`}},
		{"bad bucket", doc("sinks:", "  lake: {kind: parquet-s3, bucket: My_Bucket}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": bucket "My_Bucket" is not an S3 bucket name (3..63 of a-z, 0-9, . and -, starting and ending with a letter or digit)`}},
		{"postgres needs url_env", doc("sinks:", "  lake: {kind: postgres}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": url_env is required (an environment variable's name, e.g. SKIPPR_PG_URL)`}},
		{"postgres bad url_env and schema", doc("sinks:", "  lake: {kind: postgres, url_env: 'postgres://x', schema: Sales}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": url_env "postgres://x": want an environment variable's name (A-Z, 0-9, _; not starting with a digit), e.g. SKIPPR_PG_URL`,
			`skipprd.yaml:2: sink "lake": schema "Sales": want a lower-case letter or _, then up to 62 of a-z, 0-9 and _, e.g. public`}},
		{"postgres-cdc", doc(sinks, "sources:", "  - {name: a, kind: postgres-cdc, sink: lake, url_env: PG, slot: My-Slot, tables: [orders, public.Bad, [x]]}",
			"  - {name: b, kind: postgres-cdc, sink: lake, url_env: PG, slot: my_slot}", "  - {name: c, kind: postgres-cdc, sink: lake, url_env: PG, slot: my_slot}"), []string{
			`skipprd.yaml:3: sources[0] "a": slot "My-Slot": want 1 to 63 of a-z, 0-9 and _ (Postgres takes it unquoted)`,
			`skipprd.yaml:3: sources[0] "a": table "orders": want schema.table, e.g. public.orders`,
			`skipprd.yaml:3: sources[0] "a": table "public.Bad": namespace "Bad": only a lower-case letter followed by lower-case letters, digits and underscores`,
			`skipprd.yaml:3: sources[0] "a": tables: want schema.table, found a list`,
			`skipprd.yaml:5: sources[2] "c": slot "my_slot" is also the slot of sources[1] "b" (line 4): a slot streams to one reader`}},
		{"files needs path and namespace", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake}"), []string{
			`skipprd.yaml:3: sources[0] "a": path is required (a directory to take files from; relative to this file's directory)`,
			`skipprd.yaml:3: sources[0] "a": namespace is required (the namespace every row goes to, e.g. drops)`}},
		{"objects needs bucket and namespace", doc(sinks, "sources:", "  - {name: a, kind: objects, sink: lake, prefix: in/}"), []string{
			`skipprd.yaml:3: sources[0] "a": bucket is required (an S3 bucket name)`,
			`skipprd.yaml:3: sources[0] "a": namespace is required (the namespace every row goes to, e.g. drops)`}},
		{"source needs name and sink", doc(sinks, "sources:", "  - kind: generator"), []string{
			`skipprd.yaml:3: sources[0]: name is required (a source name, e.g. api)`,
			`skipprd.yaml:3: sources[0]: sink is required (the name of a sink under sinks)`}},
		{"empty value", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake, path: '', namespace: ~}"), []string{
			`skipprd.yaml:3: sources[0] "a": path is empty; give a directory to take files from; relative to this file's directory`,
			`skipprd.yaml:3: sources[0] "a": namespace is empty; give the namespace every row goes to, e.g. drops`}},

		// Sink references.
		{"undefined sink", doc("sinks:", "  lake: {kind: parquet-dir, path: lake}", "  archive: {kind: parquet-dir, path: archive}", "sources:",
			"  - {name: a, kind: generator, sink: lake}", "  - {name: api, kind: http, sink: archive, namespaces: {ev: {sink: lake2}}}"), []string{
			`skipprd.yaml:6: sources[1] "api" namespace "ev": sink "lake2" is not defined (defined: archive, lake)`}},
		{"no sinks", doc("sinks: {}", "sources:", gen("a")), []string{
			`skipprd.yaml:1: sinks: no sink is defined; want at least one, e.g. lake: {kind: parquet-dir, path: lake}`}},
		{"no sources", doc(sinks, "sources: []"), []string{
			`skipprd.yaml:2: sources: no source is defined; want at least one, e.g. - {name: api, kind: http, sink: lake}`}},
		{"unused sink", doc("sinks:", "  lake: {kind: parquet-dir, path: lake}", "  old: {kind: parquet-dir, path: old}", "sources:", gen("a")), []string{
			`skipprd.yaml:3: sinks: sink "old" is never used: no source or namespace writes to it; remove it, or name it in a source's sink:`}},

		// http.
		{"listen without port", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: localhost}"), []string{
			`skipprd.yaml:3: sources[0] "a": listen "localhost": want host:port, e.g. 127.0.0.1:8080 (missing port in address)`}},
		{"listen port range", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: 'localhost:70000'}"), []string{
			`skipprd.yaml:3: sources[0] "a": listen "localhost:70000": port "70000": want a number in 1..65535 (0: any free port)`}},
		{"listen port name", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: 'localhost:http'}"), []string{
			`skipprd.yaml:3: sources[0] "a": listen "localhost:http": port "http": want a number in 1..65535 (0: any free port)`}},
		{"listen bad host", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: 'a b:80'}"), []string{
			`skipprd.yaml:3: sources[0] "a": listen "a b:80": host "a b" is neither an IP address nor a host name`}},
		{"listen shared", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: '127.0.0.1:9000'}", "  - {name: b, kind: http, sink: lake, listen: '127.0.0.1:9000'}"), []string{
			`skipprd.yaml:4: sources[1] "b": listen 127.0.0.1:9000 clashes with 127.0.0.1:9000 of sources[0] "a" (line 3); give each http source its own port`}},
		{"listen default shared", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake}", "  - {name: b, kind: http, sink: lake}"), []string{
			`skipprd.yaml:4: sources[1] "b": listen 127.0.0.1:8080 (the default) clashes with 127.0.0.1:8080 (the default) of sources[0] "a" (line 3); give each http source its own port`}},
		{"listen wildcard shared", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: ':8080'}", "  - {name: b, kind: http, sink: lake}"), []string{
			`skipprd.yaml:4: sources[1] "b": listen 127.0.0.1:8080 (the default) clashes with :8080 of sources[0] "a" (line 3); give each http source its own port`}},
		{"token_env", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, token_env: my-token}"), []string{
			`skipprd.yaml:3: sources[0] "a": token_env "my-token": want an environment variable's name (A-Z, 0-9, _; not starting with a digit), e.g. SKIPPR_HTTP_TOKEN`}},
		{"body_max_bytes unit", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, body_max_bytes: 64M}"), []string{
			`skipprd.yaml:3: sources[0] "a": body_max_bytes "64M": want a whole number of bytes, optionally with a unit: B, KiB, MiB, GiB (powers of 2) or KB, MB, GB (powers of 10), e.g. 64MiB`}},
		{"body_max_bytes range", doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, body_max_bytes: 2GiB}", "  - {name: b, kind: http, sink: lake, listen: ':0', body_max_bytes: 1000}"), []string{
			`skipprd.yaml:3: sources[0] "a": body_max_bytes "2GiB" is 2147483648 bytes; want 1KiB (1024) .. 1GiB (1073741824)`,
			`skipprd.yaml:4: sources[1] "b": body_max_bytes "1000" is 1000 bytes; want 1KiB (1024) .. 1GiB (1073741824)`}},
		{"namespaces empty", doc(sinks, "sources:", "  - name: a", "    kind: http", "    sink: lake", "    namespaces:"), []string{
			`skipprd.yaml:6: sources[0] "a": namespaces is empty, so every request would be refused; list some, or remove the key to accept any namespace`}},

		// files and objects.
		{"format", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake, path: in, namespace: d, format: json}"), []string{
			`skipprd.yaml:3: sources[0] "a": format "json" is not one of auto, jsonl, csv, parquet`}},
		{"on_error", doc(sinks, "sources:", "  - {name: a, kind: objects, bucket: b12, sink: lake, namespace: d, on_error: retry}"), []string{
			`skipprd.yaml:3: sources[0] "a": on_error "retry" is not one of stop, skip`}},
		{"order, settle, in_flight", doc(sinks, "sources:",
			"  - {name: a, kind: objects, bucket: b12, sink: lake, namespace: d, order: time}",
			"  - {name: b, kind: files, sink: lake, path: in, namespace: e, settle: 1m}",
			"  - {name: c, kind: files, sink: lake, path: in2, namespace: f, order: keys, settle: 10ms, in_flight: 0}",
			"  - {name: e, kind: files, sink: lake, path: in3, namespace: g, in_flight: four}"), []string{
			`skipprd.yaml:3: sources[0] "a": order "time" is not one of any, keys`,
			`skipprd.yaml:4: sources[1] "b": settle applies to order: keys only (order is any)`,
			`skipprd.yaml:5: sources[2] "c": settle "10ms": want a duration in 1s..24h, e.g. 1m or 10m`,
			`skipprd.yaml:5: sources[2] "c": in_flight "0": want a whole number 1..64`,
			`skipprd.yaml:6: sources[3] "e": in_flight "four": want a whole number 1..64`}},
		{"poll", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake, path: in, namespace: d, poll: 2}",
			"  - {name: b, kind: files, sink: lake, path: in2, namespace: e, poll: 10ms}", "  - {name: c, kind: files, sink: lake, path: in3, namespace: f, poll: 2h}"), []string{
			`skipprd.yaml:3: sources[0] "a": poll "2": want a duration in 100ms..1h, e.g. 2s or 500ms`,
			`skipprd.yaml:4: sources[1] "b": poll "10ms": want a duration in 100ms..1h, e.g. 2s or 500ms`,
			`skipprd.yaml:5: sources[2] "c": poll "2h": want a duration in 100ms..1h, e.g. 2s or 500ms`}},
		{"namespace written twice", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake, path: in, namespace: d}", "  - {name: b, kind: objects, bucket: b12, sink: lake, namespace: d}"), []string{
			`skipprd.yaml:4: sources[1] "b": namespace "d" of sink "lake" is already written by sources[0] "a" (line 3); give one of them another namespace or sink`}},
		{"namespace of the generator", doc(sinks, "sources:", gen("a"), "  - {name: b, kind: files, sink: lake, path: in, namespace: orders}"), []string{
			`skipprd.yaml:4: sources[1] "b": namespace "orders" of sink "lake" is already written by sources[0] "a" (line 3); give one of them another namespace or sink`}},
		{"two generators", doc(sinks, "sources:", gen("a"), gen("b")), []string{
			`skipprd.yaml:4: sources[1] "b": namespace "events" of sink "lake" is already written by sources[0] "a" (line 3); give one of them another namespace or sink`}},
		{"files path twice", doc(sinks, "sources:", "  - {name: a, kind: files, sink: lake, path: in, namespace: d}", "  - {name: b, kind: files, sink: lake, path: ./in/, namespace: e}"), []string{
			`skipprd.yaml:4: sources[1] "b": path "./in/" is also the directory of sources[0] "a" (line 3): both would take the same files`}},
		{"objects overlap", doc(sinks, "sources:", "  - {name: a, kind: objects, bucket: b12, prefix: in/, sink: lake, namespace: d}",
			"  - {name: b, kind: objects, bucket: b12, prefix: in/x/, sink: lake, namespace: e}"), []string{
			`skipprd.yaml:4: sources[1] "b": bucket and prefix "b12/in/x/" overlap "b12/in/" of sources[0] "a" (line 3): both would take the same objects`}},
		{"objects read the lake", doc("sinks: {s3: {kind: parquet-s3, bucket: b12, prefix: /lake}}", "sources:", "  - {name: a, kind: objects, bucket: b12, sink: s3, namespace: d}"), []string{
			`skipprd.yaml:3: sources[0] "a": bucket and prefix "b12/" overlap sink "s3"'s "b12/lake/": the source would ingest the lake's own files`}},
		{"objects prefix slash", doc(sinks, "sources:", "  - {name: a, kind: objects, bucket: b12, prefix: /in/, sink: lake, namespace: d}"), []string{
			`skipprd.yaml:3: sources[0] "a": prefix "/in/": S3 keys do not start with /; write "in/"`}},

		// parquet-dir paths.
		{"sink path reserved", doc("sinks:", "  lake: {kind: parquet-dir, path: wal/lake}", "  dot: {kind: parquet-dir, path: .}", "sources:", gen("a"), "  - {name: b, kind: http, sink: dot}"), []string{
			`skipprd.yaml:2: sink "lake": path "wal/lake" is inside DATA_DIR's wal, which the daemon owns (reserved: wal, segments, wal.lock, wal-s3.bolt, pipeline); want e.g. lake`,
			`skipprd.yaml:3: sink "dot": path "." is DATA_DIR itself, where the WAL lives; want a folder under it, e.g. lake`}},
		{"sink path twice", doc("sinks:", "  lake: {kind: parquet-dir, path: lake}", "  also: {kind: parquet-dir, path: lake/}", "sources:", gen("a"), "  - {name: b, kind: http, sink: also}"), []string{
			`skipprd.yaml:3: sink "also": path "lake/" is also the path of sink "lake" (line 2): two sinks would write one folder`}},

		// Lanes: every sink kind's file_bytes and flush_interval.
		{"file_bytes unit", doc("sinks: {lake: {kind: parquet-dir, path: lake, file_bytes: 128M}}", "sources:", gen("a")), []string{
			`skipprd.yaml:1: sink "lake": file_bytes "128M": want a whole number of bytes, optionally with a unit: B, KiB, MiB, GiB (powers of 2) or KB, MB, GB (powers of 10), e.g. 64MiB`}},
		{"file_bytes negative", doc("sinks: {lake: {kind: parquet-dir, path: lake, file_bytes: -1}}", "sources:", gen("a")), []string{
			`skipprd.yaml:1: sink "lake": file_bytes "-1": want a whole number of bytes, optionally with a unit: B, KiB, MiB, GiB (powers of 2) or KB, MB, GB (powers of 10), e.g. 64MiB`}},
		{"file_bytes range", doc("sinks:", "  lake: {kind: parquet-dir, path: lake, file_bytes: 512KiB}", "  s3: {kind: parquet-s3, bucket: b12, file_bytes: 2GiB}",
			"  pg: {kind: postgres, url_env: PG, file_bytes: 1}", "sources:", "  - {name: a, kind: http, sink: lake, namespaces: {x: {sink: s3}, y: {sink: pg}}}"), []string{
			`skipprd.yaml:2: sink "lake": file_bytes "512KiB" is 524288 bytes; want 0 (a job per segment) or 1MiB (1048576) .. 1GiB (1073741824)`,
			`skipprd.yaml:3: sink "s3": file_bytes "2GiB" is 2147483648 bytes; want 0 (a job per segment) or 1MiB (1048576) .. 1GiB (1073741824)`,
			`skipprd.yaml:4: sink "pg": file_bytes "1" is 1 bytes; want 0 (a job per segment) or 1MiB (1048576) .. 1GiB (1073741824)`}},
		{"file_bytes empty", doc("sinks:", "  lake:", "    kind: parquet-dir", "    path: lake", "    file_bytes:", "sources:", gen("a")), []string{
			`skipprd.yaml:5: sink "lake": file_bytes is empty; give a size, e.g. 128MiB, or remove the key for the default`}},
		{"file_bytes a list", doc("sinks: {lake: {kind: parquet-dir, path: lake, file_bytes: [1MiB]}}", "sources:", gen("a")), []string{
			`skipprd.yaml:1: sink "lake": file_bytes: want text, found a list`}},
		{"flush_interval range", doc("sinks:", "  lake: {kind: parquet-dir, path: lake, flush_interval: 500ms}", "  s3: {kind: parquet-s3, bucket: b12, flush_interval: 25h}",
			"  pg: {kind: postgres, url_env: PG, flush_interval: 5}", "  n: {kind: parquet-dir, path: n, flush_interval: -1s}",
			"sources:", "  - {name: a, kind: http, sink: lake, namespaces: {x: {sink: s3}, y: {sink: pg}, z: {sink: n}}}"), []string{
			`skipprd.yaml:2: sink "lake": flush_interval "500ms": want a duration in 1s..24h, e.g. 5m or 30s`,
			`skipprd.yaml:3: sink "s3": flush_interval "25h": want a duration in 1s..24h, e.g. 5m or 30s`,
			`skipprd.yaml:4: sink "pg": flush_interval "5": want a duration in 1s..24h, e.g. 5m or 30s`,
			`skipprd.yaml:5: sink "n": flush_interval "-1s": want a duration in 1s..24h, e.g. 5m or 30s`}},
		{"flush_interval 0 with file_bytes", doc("sinks:", "  lake:", "    kind: postgres", "    url_env: PG", "    file_bytes: 64MiB", "    flush_interval: 0",
			"sources:", gen("a")), []string{
			`skipprd.yaml:6: sink "lake": flush_interval 0 with file_bytes 67108864: a lane that never fills its file would wait for ever; want a duration in 1s..24h, or file_bytes: 0 for a job per segment`}},
		{"iceberg on s3 without a catalog", doc("sinks:", "  lake: {kind: iceberg, warehouse: \"s3://my-bucket/lake\"}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": warehouse "s3://my-bucket/lake" is on S3, so the catalog must outlive this host: set catalog_url_env to the name of a variable holding a postgres:// URL (the default SQLite catalog is a file on this host)`}},
		{"iceberg keys", doc("sinks:", "  lake:", "    kind: iceberg", "    warehouse: wal/x", "    namespace: 9lives", "    partition_by: at-time", "    snapshots_kept: 0",
			"    small_files: 1", "sources:", gen("a")), []string{
			`skipprd.yaml:4: sink "lake": warehouse "wal/x" is inside DATA_DIR's wal, which the daemon owns (reserved: wal, segments, wal.lock, wal-s3.bolt, pipeline); want e.g. lake`,
			`skipprd.yaml:5: sink "lake": namespace "9lives": want a letter or _, then up to 127 of letters, digits and _, e.g. skipprd`,
			`skipprd.yaml:6: sink "lake": partition_by "at-time": want a letter or _, then up to 127 of letters, digits and _, e.g. _ingested_at`,
			`skipprd.yaml:7: sink "lake": snapshots_kept "0": want a whole number from 1 to 10000`,
			`skipprd.yaml:8: sink "lake": small_files "1": want 0 (never rewrite) or a whole number from 2 to 10000`}},
		{"iceberg warehouse not a bucket", doc("sinks:", "  lake: {kind: iceberg, warehouse: \"s3://B/x\", catalog_url_env: CAT}", "sources:", gen("a")), []string{
			`skipprd.yaml:2: sink "lake": warehouse "s3://B/x": bucket "B" is not an S3 bucket name (3..63 of a-z, 0-9, . and -, starting and ending with a letter or digit)`}},
		{"iceberg warehouse is a parquet folder", doc("sinks:", "  lake: {kind: parquet-dir, path: lake}", "  tables: {kind: iceberg}", "sources:", gen("a"),
			"  - {name: b, kind: http, sink: tables}"), []string{
			`skipprd.yaml:3: sink "tables": path "lake" is also the path of sink "lake" (line 2): two sinks would write one folder`}},
		{"lane keys, unknown kind", doc("sinks: {lake: {kind: kafka, file_bytes: 1MiB, topic: t}}", "sources:", gen("a")), []string{
			`skipprd.yaml:1: sink "lake": kind "kafka" is not one of parquet-dir, parquet-s3, postgres, iceberg`,
			`skipprd.yaml:1: sink "lake": unknown key "topic" (allowed: kind, path, file_bytes, flush_interval, bucket, prefix, url_env, schema, warehouse, catalog_url_env, namespace, partition_by, snapshots_kept, small_files)`}},

		// settings.
		{"wal_storage", doc("settings: {wal_storage: S3}", sinks, "sources:", gen("a")), []string{
			`skipprd.yaml:1: settings: wal_storage "S3" is not one of disk, embedded, s3`}},
		{"data_dir empty", doc("settings:", "  data_dir:", sinks, "sources:", gen("a")), []string{
			`skipprd.yaml:2: settings: data_dir is empty; give a directory, or remove the key for the default`}},
		{"wal_storage empty", doc("settings: {wal_storage: ''}", sinks, "sources:", gen("a")), []string{
			`skipprd.yaml:1: settings: wal_storage is empty; give disk, embedded, s3, or remove the key for the default`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errorLines(t, tc.text)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
		})
	}
}

// TestPipelineAccepts: what the checks must not refuse.
func TestPipelineAccepts(t *testing.T) {
	const sinks = "sinks: {lake: {kind: parquet-dir, path: lake}}"
	for name, text := range map[string]string{
		"http and files share a namespace": doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, namespaces: {d: }}",
			"  - {name: b, kind: files, sink: lake, path: in, namespace: d}"),
		"a namespace in two sinks": doc("sinks: {lake: {kind: parquet-dir, path: lake}, b: {kind: parquet-dir, path: b}}", "sources:",
			"  - {name: a, kind: files, sink: lake, path: in, namespace: d}", "  - {name: b, kind: files, sink: b, path: in2, namespace: d}"),
		"port 0 twice":        doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: '127.0.0.1:0'}", "  - {name: b, kind: http, sink: lake, listen: '127.0.0.1:0'}"),
		"one port, two hosts": doc(sinks, "sources:", "  - {name: a, kind: http, sink: lake, listen: '127.0.0.1:80'}", "  - {name: b, kind: http, sink: lake, listen: '[::1]:80'}"),
		"a sink used only by a namespace": doc("sinks: {lake: {kind: parquet-dir, path: lake}, b: {kind: parquet-s3, bucket: bkt}}", "sources:",
			"  - {name: a, kind: http, sink: lake, namespaces: {d: {sink: b}}}"),
		"anchors and aliases":               doc("sinks: {lake: &lake {kind: parquet-dir, path: lake}}", "sources:", "  - {name: a, kind: http, sink: lake, namespaces: {d: &ns {sink: lake}, e: *ns}}"),
		"nulls for empty optional mappings": doc("settings:", sinks, "sources:", "  - {name: a, kind: http, sink: lake, namespaces: {d: ~}}"),
	} {
		t.Run(name, func(t *testing.T) { mustLoad(t, writePipeline(t, text)) })
	}
}

// TestPipelineErrorsCollected: every error of a file is reported, in line
// order, and past pipelineErrorsMax the rest are counted.
func TestPipelineErrorsCollected(t *testing.T) {
	got := errorLines(t, doc(
		"sinks:",
		"  lake: {kind: parquet-dir, path: lake, bucket: b}",
		"sources:",
		"  - {name: a, kind: http, sink: nowhere}",
		"  - {name: a, kind: files, sink: lake, namespace: x}",
	))
	want := []string{
		`skipprd.yaml:2: sink "lake": key "bucket" is for kind parquet-s3, not parquet-dir (kind parquet-dir takes: kind, path, file_bytes, flush_interval)`,
		`skipprd.yaml:4: sources[0] "a": sink "nowhere" is not defined (defined: lake)`,
		`skipprd.yaml:5: sources[1] "a": path is required (a directory to take files from; relative to this file's directory)`,
		`skipprd.yaml:5: sources[1] "a": name "a" is already the name of the source on line 4; source names must be unique`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}

	lines := []string{"sinks: {lake: {kind: parquet-dir, path: lake}}", "sources:"}
	for range pipelineErrorsMax + 5 {
		lines = append(lines, "  - {name: a, kind: generator, sink: lake, x: 1}")
	}
	got = errorLines(t, doc(lines...))
	if len(got) != pipelineErrorsMax+1 {
		t.Fatalf("%d errors, want %d and a count:\n%s", len(got), pipelineErrorsMax, strings.Join(got, "\n"))
	}
	// Each line has an unknown key; each but the first a duplicate name
	// and a duplicate generator: 25 + 24 + 24.
	if last := got[pipelineErrorsMax]; last != "skipprd.yaml: … and 53 more" {
		t.Errorf("last: %q", last)
	}
	if got[0] != `skipprd.yaml:3: sources[0] "a": unknown key "x" (allowed: name, kind, sink)` {
		t.Errorf("first: %q", got[0])
	}
}

func TestPipelineFileLimits(t *testing.T) {
	big := doc("sinks: {lake: {kind: parquet-dir, path: lake}}", "sources: [{name: a, kind: generator, sink: lake}]") +
		strings.Repeat("# padding\n", pipelineFileMax/10)
	got := errorLines(t, big)
	if want := []string{"skipprd.yaml: larger than 1048576 bytes (1 MiB): not a pipeline file"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	missing := filepath.Join(t.TempDir(), "none.yaml")
	_, err := loadPipeline(missing)
	pes := pipelineErrors(t, err)
	if len(pes) != 1 || pes[0].Path != missing || !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(pes[0].Msg, "cannot open it: ") {
		t.Errorf("missing file: %v", err)
	}
}

func TestPipelineApplySettings(t *testing.T) {
	p := mustLoad(t, writePipeline(t, doc(
		"settings: {data_dir: /var/lib/skipprd, wal_storage: embedded}",
		"sinks: {lake: {kind: parquet-dir, path: lake}}",
		"sources: [{name: a, kind: generator, sink: lake}]")))
	env := map[string]string{envWALStorage: "s3", envWALBucket: "wal-bucket", envIngestThreads: "3"}
	getenv := p.applySettings(func(k string) string { return env[k] })
	if got := getenv(envDataDir); got != "/var/lib/skipprd" {
		t.Errorf("DATA_DIR unset: %q, want the file's", got)
	}
	if got := getenv(envWALStorage); got != "s3" {
		t.Errorf("WAL_STORAGE set: %q, want the environment's", got)
	}
	env[envDataDir] = "  "
	if got := getenv(envDataDir); got != "/var/lib/skipprd" {
		t.Errorf("DATA_DIR blank: %q, want the file's", got)
	}
	if got := getenv(envIngestThreads); got != "3" {
		t.Errorf("other variables: %q", got)
	}
	cfg, err := parseConfig(getenv)
	if err != nil || cfg.DataDir != "/var/lib/skipprd" || cfg.WALStorage != walS3 || cfg.Bucket != "wal-bucket" {
		t.Errorf("parseConfig: %+v, %v", cfg, err)
	}

	// Nothing in the file: the environment alone.
	getenv = defaultPipelineFile().applySettings(func(string) string { return "" })
	if cfg, err := parseConfig(getenv); err != nil || cfg.DataDir != defaultDataDir || cfg.WALStorage != walDisk {
		t.Errorf("no settings: %+v, %v", cfg, err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "64MiB": 64 << 20, "64 MiB": 64 << 20, "64mib": 64 << 20, "1KiB": 1024,
		"1GiB": 1 << 30, "1KB": 1000, "5MB": 5_000_000, "2GB": 2_000_000_000, "7B": 7, " 8 kb ": 8000,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1.5MiB", "-1", "+1", "1 TiB", "1K", "1M", "1 2", "99999999999999999999", "9000000000GiB", "0x10"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// The daemon itself on a bad pipeline file: exit 2, every problem logged
// with the file and line, nothing created under DATA_DIR; a file that
// does not exist is named.
func TestPipelineBadFileExits2(t *testing.T) {
	path := writePipeline(t, doc(
		"sinks:",
		"  lake: {kind: parquet-dir, path: lake, colour: red}",
		"sources:",
		"  - {name: Api, kind: http, sink: nowhere}",
	))
	dataDir := filepath.Join(t.TempDir(), "data")
	code, logs := runPipelineEnv(t, map[string]string{envPipelineFile: path, envDataDir: dataDir})
	if code != 2 {
		t.Fatalf("exit %d, want 2; logs:\n%s", code, logs)
	}
	for _, want := range []string{`skipprd.yaml:2`, `unknown key \"colour\"`, `skipprd.yaml:4`, `name \"Api\"`, `sink \"nowhere\" is not defined`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs do not say %s:\n%s", want, logs)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("DATA_DIR was touched before the file was checked: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	code, logs = runPipelineEnv(t, map[string]string{envPipelineFile: missing, envDataDir: dataDir})
	if code != 2 || !strings.Contains(logs, missing) {
		t.Errorf("a missing file: exit %d, logs:\n%s", code, logs)
	}
}

// A Kafka source of topic_regex in a group loads with both, and no
// topics: its topics are found when it runs.
func TestPipelineKafkaTopicRegexAndGroup(t *testing.T) {
	p := mustLoad(t, writePipeline(t, doc("sinks: {lake: {kind: parquet-dir, path: lake}}", "sources:",
		"  - {name: shop, kind: kafka, sink: lake, brokers: ['k:9092'], topic_regex: 'shop\\..*', group: skipprd-shop}")))
	k := p.Sources[0].Kafka
	if k == nil || k.TopicRegex != `shop\..*` || k.Group != "skipprd-shop" || k.Topics != nil {
		t.Fatalf("kafka spec %+v: want topic_regex shop\\..* and group skipprd-shop, no topics", k)
	}
}

// TestREADMESourceExamples: the README's file of one source of each other
// kind loads as it stands — its lines are what a user copies.
func TestREADMESourceExamples(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	_, section, _ := strings.Cut(readme, "## Your own data")
	blocks := strings.Split(section, "```yaml\n")
	if len(blocks) < 3 {
		t.Fatal("README: no second yaml block under \"## Your own data\"")
	}
	block, _, _ := strings.Cut(blocks[2], "```")
	p := mustLoad(t, writePipeline(t, block))
	kinds := map[string]bool{}
	for _, s := range p.Sources {
		kinds[s.Kind] = true
	}
	for _, k := range []string{"kafka", "nats", "mqtt", "objects", "postgres-cdc"} {
		if !kinds[k] {
			t.Errorf("the README's examples have no %s source (kinds %v)", k, kinds)
		}
	}
}
