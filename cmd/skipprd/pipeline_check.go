package main

// Checking a pipeline file: the walk over its YAML nodes, the checks of
// each key, and the checks across sources and sinks (pipeline.go).

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skipprd/skipprd/engine/wal"
	"github.com/skipprd/skipprd/sources"
	"github.com/skipprd/skipprd/sources/generator"
	"github.com/skipprd/skipprd/sources/kafka"
	"github.com/skipprd/skipprd/sources/mqtt"
	"github.com/skipprd/skipprd/sources/natsjs"
	"github.com/skipprd/skipprd/sources/objects"
)

// checker walks the document, collecting errors and what the
// cross-checks need.
type checker struct {
	path string // as given, for messages
	dir  string // the file's directory: relative paths resolve against it
	errs []*pipelineError

	refs         []located // every sink: a source or namespace names
	refsComplete bool      // false once a source lacks its sink: (unused sinks would be guesses)
	listens      []listenAt
	writers      []writer // fixed namespaces written by files, objects and generator sources
	filePaths    []located
	objectPaths  []located // bucket/prefix of objects sources
	slots        []located // replication slots of postgres-cdc sources
	envRefs      []located // every *_env key given: value the variable's name, shown the key
}

// located is a value with where it was written, for "also …" messages.
type located struct {
	value string // compared
	shown string // in messages: as written
	where string
	line  int
	kind  string // a sink's kind, where it matters
}

type listenAt struct {
	host string
	port int
	at   located
}

type writer struct {
	namespace, sink string
	at              located
}

func (c *checker) errorf(line int, where, format string, args ...any) {
	c.errs = append(c.errs, &pipelineError{Path: c.path, Line: line, Where: where, Msg: fmt.Sprintf(format, args...)})
}

// result is every error, by line, the first pipelineErrorsMax of them.
func (c *checker) result() error {
	if len(c.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(c.errs, func(a, b *pipelineError) int { return cmp.Compare(a.Line, b.Line) })
	errs := make([]error, 0, pipelineErrorsMax+1)
	for i, e := range c.errs {
		if i == pipelineErrorsMax {
			errs = append(errs, &pipelineError{Path: c.path, Msg: fmt.Sprintf("… and %d more", len(c.errs)-i)})
			break
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// mapping is one YAML mapping's entries, aliases resolved.
type mapping struct {
	where string
	line  int                   // for "is required": the owner's line
	order []string              // keys in file order
	keys  map[string]*yaml.Node // key nodes
	vals  map[string]*yaml.Node // value nodes
}

// mappingOf reads n as a mapping (null as an empty one), reporting
// duplicate, merge and non-text keys. want describes the mapping for a
// type error.
func (c *checker) mappingOf(n *yaml.Node, line int, where, want string) (*mapping, bool) {
	n = deref(n)
	m := &mapping{where: where, line: line, keys: map[string]*yaml.Node{}, vals: map[string]*yaml.Node{}}
	if isNull(n) {
		return m, true
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n.Line, where, "want %s, found %s", want, describe(n))
		return nil, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch prev, dup := m.keys[k.Value]; {
		case k.Kind != yaml.ScalarNode:
			c.errorf(k.Line, where, "a key must be a word, found %s", describe(k))
		case k.ShortTag() == "!!merge":
			c.errorf(k.Line, where, "merge keys (<<) are not supported; write the keys out")
		case dup:
			c.errorf(k.Line, where, "key %q is already set on line %d", k.Value, prev.Line)
		default:
			m.order = append(m.order, k.Value)
			m.keys[k.Value], m.vals[k.Value] = k, deref(v)
		}
	}
	return m, true
}

// allow reports every key of m not in allowed. others lists, by kind, the
// keys of every kind (nil where kinds do not apply); kind is m's ("" if
// unknown), so a key of another kind is told apart from a typo.
func (c *checker) allow(m *mapping, allowed []string, kind string, others map[string][]string) {
	for _, key := range m.order {
		if slices.Contains(allowed, key) {
			continue
		}
		line := m.keys[key].Line
		if owners := kindsWith(others, key); len(owners) > 0 && kind != "" {
			c.errorf(line, m.where, "key %q is for kind %s, not %s (kind %s takes: %s)",
				key, strings.Join(owners, " or "), kind, kind, strings.Join(allowed, ", "))
			continue
		}
		c.errorf(line, m.where, "unknown key %q (allowed: %s)", key, strings.Join(allowed, ", "))
	}
}

// kindsWith lists the kinds whose keys include key, sorted.
func kindsWith(others map[string][]string, key string) []string {
	var kinds []string
	for kind, keys := range others {
		if slices.Contains(keys, key) {
			kinds = append(kinds, kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// allKeys is common followed by every kind's keys, each once.
func allKeys(common []string, kinds []string, keys map[string][]string) []string {
	all := slices.Clone(common)
	for _, k := range kinds {
		for _, key := range keys[k] {
			if !slices.Contains(all, key) {
				all = append(all, key)
			}
		}
	}
	return all
}

// str returns key's value as text and its line. ok is false when the key
// is absent, or its value is not a scalar (reported); null reads as "".
// Any scalar is text: a bucket may be called 2024.
func (c *checker) str(m *mapping, key string) (s string, line int, ok bool) {
	n := m.vals[key]
	switch {
	case n == nil:
		return "", 0, false
	case n.Kind != yaml.ScalarNode:
		c.errorf(n.Line, m.where, "%s: want text, found %s", key, describe(n))
		return "", n.Line, false
	case isNull(n):
		return "", n.Line, true
	}
	return n.Value, n.Line, true
}

// text is str for a value that may not be empty; required reports an
// absent key (hint says what it is for).
func (c *checker) text(m *mapping, key string, required bool, hint string) (string, int, bool) {
	s, line, ok := c.str(m, key)
	switch {
	case line == 0 && required:
		c.errorf(m.line, m.where, "%s is required (%s)", key, hint)
	case ok && strings.TrimSpace(s) == "" && required:
		c.errorf(line, m.where, "%s is empty; give %s", key, hint)
		ok = false
	case ok && strings.TrimSpace(s) == "":
		c.errorf(line, m.where, "%s is empty; give %s, or remove the key for the default", key, hint)
		ok = false
	}
	return s, line, ok
}

// oneOf is text restricted to values; def is returned when the key is
// absent or wrong.
func (c *checker) oneOf(m *mapping, key string, values []string, required bool, def string) string {
	s, line, ok := c.text(m, key, required, strings.Join(values, ", "))
	if !ok {
		return def
	}
	if !slices.Contains(values, s) {
		c.errorf(line, m.where, "%s %q is not one of %s", key, s, strings.Join(values, ", "))
		return def
	}
	return s
}

// boolean reads a true/false key; absent is false. A string such as
// "yes" is refused rather than guessed at.
func (c *checker) boolean(m *mapping, key string) bool {
	n := m.vals[key]
	if n == nil {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		c.errorf(n.Line, m.where, "%s: want true or false, found %s", key, describe(n))
		return false
	}
	return strings.EqualFold(n.Value, "true")
}

// document reads the top level.
func (c *checker) document(root *yaml.Node) *pipelineFile {
	p := &pipelineFile{Path: c.path}
	m, ok := c.mappingOf(root, root.Line, "top level", "a mapping with settings, sinks and sources")
	if !ok {
		return p
	}
	c.allow(m, topKeys, "", nil)
	p.Settings = c.settings(m)
	p.Sinks = c.sinks(m)
	p.Sources = c.sources(m)
	return p
}

func (c *checker) settings(top *mapping) settingsSpec {
	var s settingsSpec
	n, present := top.vals["settings"]
	if !present {
		return s
	}
	m, ok := c.mappingOf(n, top.keys["settings"].Line, "settings", "a mapping of data_dir and wal_storage")
	if !ok {
		return s
	}
	c.allow(m, settingsKeys, "", nil)
	if v, _, ok := c.text(m, "data_dir", false, "a directory"); ok {
		s.DataDir = c.resolve(v)
	}
	s.WALStorage = c.oneOf(m, "wal_storage", walStorages, false, "")
	return s
}

// resolve joins a relative path to the file's directory, so the file
// means the same wherever the daemon is started from.
func (c *checker) resolve(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(c.dir, path)
}

// sinks reads the sinks mapping, sorted by name.
func (c *checker) sinks(top *mapping) []sinkSpec {
	n, present := top.vals["sinks"]
	if !present {
		c.errorf(top.line, top.where, "sinks is required: at least one sink, e.g. lake: {kind: parquet-dir, path: lake}")
		return nil
	}
	line := top.keys["sinks"].Line
	m, ok := c.mappingOf(n, line, "sinks", "a mapping of sink name to sink, e.g. lake: {kind: parquet-dir, path: lake}")
	if !ok {
		return nil
	}
	if len(m.order) == 0 {
		c.errorf(line, "sinks", "no sink is defined; want at least one, e.g. lake: {kind: parquet-dir, path: lake}")
	}
	specs := make([]sinkSpec, 0, len(m.order))
	for _, name := range m.order {
		specs = append(specs, c.sink(name, m.keys[name].Line, m.vals[name]))
	}
	slices.SortFunc(specs, func(a, b sinkSpec) int { return strings.Compare(a.Name, b.Name) })
	return specs
}

func (c *checker) sink(name string, line int, n *yaml.Node) sinkSpec {
	where := fmt.Sprintf("sink %q", name)
	s := sinkSpec{Name: name, Line: line}
	if !specName.MatchString(name) {
		c.errorf(line, where, "a sink name must be a lower-case letter, then up to 62 of a-z, 0-9, _ and -")
	}
	m, ok := c.mappingOf(n, line, where, "a mapping with kind and its fields")
	if !ok {
		return s
	}
	s.Kind = c.kind(m, sinkKinds)
	c.allowKind(m, sinkCommon, s.Kind, sinkKinds, sinkKeys)
	s.Lanes = c.lanes(m)
	switch s.Kind {
	case sinkParquetDir:
		s.Path = c.sinkPath(m)
	case sinkParquetS3:
		s.Bucket = c.bucket(m)
		s.Prefix, _, _ = c.str(m, "prefix")
	case sinkIceberg:
		s.Iceberg = c.icebergSink(m)
	case sinkPostgres:
		s.URLEnv = c.envRef(m, "url_env", true, "SKIPPR_PG_URL")
		s.Schema = "public"
		if v, line, ok := c.text(m, "schema", false, "a schema name, e.g. public"); ok {
			s.Schema = v
			if !pgSchema.MatchString(v) {
				c.errorf(line, m.where, "schema %q: want a lower-case letter or _, then up to 62 of a-z, 0-9 and _, e.g. public", v)
			}
		}
	}
	return s
}

// envRef reads key, the name of an environment variable holding a secret
// (a token, a URL with a password): the file names the variable, never
// the value.
func (c *checker) envRef(m *mapping, key string, required bool, example string) string {
	v, line, ok := c.text(m, key, required, "an environment variable's name, e.g. "+example)
	if ok && !envName.MatchString(v) {
		c.errorf(line, m.where, "%s %q: want an environment variable's name (A-Z, 0-9, _; not starting with a digit), e.g. %s", key, v, example)
	}
	if ok {
		c.envRefs = append(c.envRefs, located{value: v, shown: key, where: m.where, line: line})
	}
	return v
}

// kind reads m's kind, "" if missing or not one of kinds.
func (c *checker) kind(m *mapping, kinds []string) string {
	return c.oneOf(m, "kind", kinds, true, "")
}

// allowKind checks m's keys against its kind's, or against every kind's
// when the kind is unknown (its error is reported already).
func (c *checker) allowKind(m *mapping, common []string, kind string, kinds []string, keys map[string][]string) {
	if kind == "" {
		c.allow(m, allKeys(common, kinds, keys), "", nil)
		return
	}
	c.allow(m, append(slices.Clone(common), keys[kind]...), kind, keys)
}

// reservedData are DATA_DIR's own entries, which a relative parquet-dir
// path must not be or be under: a namespace folder called wal would be
// the WAL's.
var reservedData = []string{wal.Root, segmentsDir, walLockFile, embeddedFile, ownerFile}

// sinkPath reads a parquet-dir sink's path.
func (c *checker) sinkPath(m *mapping) string {
	p, line, ok := c.text(m, "path", true, "a directory; relative to DATA_DIR, e.g. lake")
	if !ok || filepath.IsAbs(p) {
		return p
	}
	first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(p)), "/")
	switch {
	case first == ".":
		c.errorf(line, m.where, "path %q is DATA_DIR itself, where the WAL lives; want a folder under it, e.g. lake", p)
	case slices.Contains(reservedData, first):
		c.errorf(line, m.where, "path %q is inside DATA_DIR's %s, which the daemon owns (reserved: %s); want e.g. lake",
			p, first, strings.Join(reservedData, ", "))
	}
	return p
}

// bucket reads a required bucket name.
func (c *checker) bucket(m *mapping) string {
	b, line, ok := c.text(m, "bucket", true, "an S3 bucket name")
	if ok && !bucketName.MatchString(b) {
		c.errorf(line, m.where, "bucket %q is not an S3 bucket name (3..63 of a-z, 0-9, . and -, starting and ending with a letter or digit)", b)
	}
	return b
}

// sources reads the sources list.
func (c *checker) sources(top *mapping) []sourceSpec {
	c.refsComplete = true
	n, present := top.vals["sources"]
	if !present {
		c.errorf(top.line, top.where, "sources is required: at least one source, e.g. - {name: api, kind: http, sink: lake}")
		return nil
	}
	line := top.keys["sources"].Line
	if isNull(n) || n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		c.errorf(line, "sources", "no source is defined; want at least one, e.g. - {name: api, kind: http, sink: lake}")
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		c.errorf(n.Line, "sources", "want a list of sources (- name: …), found %s", describe(n))
		return nil
	}
	specs := make([]sourceSpec, 0, len(n.Content))
	for i, item := range n.Content {
		specs = append(specs, c.source(i, deref(item)))
	}
	return specs
}

func (c *checker) source(i int, n *yaml.Node) sourceSpec {
	s := sourceSpec{Line: n.Line}
	m, ok := c.mappingOf(n, n.Line, fmt.Sprintf("sources[%d]", i), "a mapping with name, kind and sink")
	if !ok {
		c.refsComplete = false
		return s
	}
	s.Name = c.sourceName(m)
	if s.Name != "" {
		m.where = fmt.Sprintf("sources[%d] %q", i, s.Name)
	}
	s.Kind = c.kind(m, sourceKinds)
	c.allowKind(m, sourceCommon, s.Kind, sourceKinds, sourceKeys)
	s.Sink = c.sinkRef(m, true)
	switch s.Kind {
	case sourceHTTP:
		s.HTTP = c.httpSource(m, s.Sink)
	case sourceFiles:
		s.Files = c.filesSource(m, s.Sink)
	case sourceObjects:
		s.Objects = c.objectsSource(m, s.Sink)
	case sourcePGCDC:
		s.PGCDC = c.pgcdcSource(m, s.Name, s.Sink)
	case sourceKafka:
		s.Kafka = c.kafkaSource(m, s.Sink)
	case sourceNATS:
		s.NATS = c.natsSource(m, s.Sink)
	case sourceMQTT:
		s.MQTT = c.mqttSource(m, s.Sink)
	case sourceGenerator:
		s.Generator = true
		for _, st := range generator.DefaultStreams() {
			c.writers = append(c.writers, writer{st.Namespace, s.Sink, located{where: m.where, line: s.Line}})
		}
	}
	return s
}

// sourceName reads a source's name, "" if missing or invalid.
func (c *checker) sourceName(m *mapping) string {
	name, line, ok := c.text(m, "name", true, "a source name, e.g. api")
	if !ok {
		return ""
	}
	if !specName.MatchString(name) {
		c.errorf(line, m.where, "name %q: want a lower-case letter, then up to 62 of a-z, 0-9, _ and -", name)
		return ""
	}
	return name
}

// sinkRef reads m's sink: and records it for the cross-checks.
func (c *checker) sinkRef(m *mapping, required bool) string {
	name, line, ok := c.text(m, "sink", required, "the name of a sink under sinks")
	if !ok {
		if required {
			c.refsComplete = false
		}
		return ""
	}
	c.refs = append(c.refs, located{value: name, where: m.where, line: line})
	return name
}

func (c *checker) httpSource(m *mapping, sink string) *httpSourceSpec {
	h := &httpSourceSpec{Listen: defaultListen, BodyMaxBytes: defaultBodyMax}
	v, line, ok := c.text(m, "listen", false, "host:port, e.g. "+defaultListen)
	switch {
	case ok:
		h.Listen = v
		c.listen(m.where, v, v, line)
	case line == 0: // absent: the default still takes its port
		c.listen(m.where, defaultListen, defaultListen+" (the default)", m.line)
	}
	h.TokenEnv = c.envRef(m, "token_env", false, "SKIPPR_HTTP_TOKEN")
	h.BodyMaxBytes, _ = c.size(m, "body_max_bytes", bodyMaxRange, defaultBodyMax)
	if _, present := m.vals["namespaces"]; present {
		h.Namespaces = c.namespaces(m, sink)
	}
	return h
}

// listen checks an http source's listen address and records it (shown
// as it is to be named in messages).
func (c *checker) listen(where, v, shown string, line int) {
	host, port, err := splitListen(v)
	if err != nil {
		c.errorf(line, where, "listen %q: %v", v, err)
		return
	}
	c.listens = append(c.listens, listenAt{host, port, located{shown: shown, where: where, line: line}})
}

// splitListen parses host:port; the host may be empty (every
// interface), port 0 picks a free port (tests).
func splitListen(v string) (string, int, error) {
	host, p, err := net.SplitHostPort(v)
	if err != nil {
		if ae, ok := errors.AsType[*net.AddrError](err); ok {
			err = errors.New(ae.Err) // without the address, which the message names
		}
		return "", 0, fmt.Errorf("want host:port, e.g. %s (%v)", defaultListen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || strings.Trim(p, "0123456789") != "" || port > 65535 {
		return "", 0, fmt.Errorf("port %q: want a number in 1..65535 (0: any free port)", p)
	}
	if _, err := netip.ParseAddr(host); host != "" && err != nil && !hostName.MatchString(host) {
		return "", 0, fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return host, port, nil
}

// size reads key, a byte count within r; def when absent or wrong
// (reported). set says the file gave a valid value.
func (c *checker) size(m *mapping, key string, r sizeRange, def int64) (n int64, set bool) {
	v, line, ok := c.text(m, key, false, "a size, e.g. "+r.example)
	if !ok {
		return def, false
	}
	n, err := r.parse(v)
	if err != nil {
		c.errorf(line, m.where, "%s", valueProblem(key, v, err))
		return def, false
	}
	return n, true
}

// sizeRange bounds a byte count, of a key or a variable.
type sizeRange struct {
	min, max int64
	shown    string // the bounds as a person writes them, e.g. "1KiB (1024) .. 1GiB (1073741824)"
	example  string
	zero     string // when not "", 0 is allowed too, and means this
}

// parse reads v as a size within r. An error that is not *outOfRange is
// one of syntax.
func (r sizeRange) parse(v string) (int64, error) {
	n, err := parseSize(v)
	switch {
	case err != nil:
		return 0, err
	case n == 0 && r.zero != "":
		return 0, nil
	case n < r.min || n > r.max:
		want := r.shown
		if r.zero != "" {
			want = fmt.Sprintf("0 (%s) or %s", r.zero, r.shown)
		}
		return 0, &outOfRange{fmt.Sprintf("is %d bytes; want %s", n, want)}
	}
	return n, nil
}

// durationRange bounds a duration, of a key or a variable.
type durationRange struct {
	min, max time.Duration
	shown    string // e.g. "100ms..1h"
	example  string // e.g. "2s or 500ms"
	zero     bool   // 0 is allowed too
}

// parse reads v as a Go duration within r.
func (r durationRange) parse(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && (d == 0 && r.zero || d >= r.min && d <= r.max) {
		return d, nil
	}
	return 0, fmt.Errorf("want a duration in %s, e.g. %s", r.shown, r.example)
}

// outOfRange is a value that reads well and is out of its bounds; its
// text follows the value ("is 5 bytes; want …").
type outOfRange struct{ msg string }

func (e *outOfRange) Error() string { return e.msg }

// valueProblem says what is wrong with value v of key (a key or a
// variable).
func valueProblem(key, v string, err error) string {
	if _, ok := errors.AsType[*outOfRange](err); ok {
		return fmt.Sprintf("%s %q %v", key, v, err)
	}
	return fmt.Sprintf("%s %q: %v", key, v, err)
}

// sizeUnits are parseSize's units, lower-cased: KiB and friends are
// powers of 2, KB and friends of 10, as everywhere else.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	"kb": 1e3, "mb": 1e6, "gb": 1e9,
}

// parseSize reads a byte count: a whole number, optionally followed
// (with or without a space) by B, KiB, MiB, GiB, KB, MB or GB, in any
// case.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	digits, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, known := sizeUnits[unit]
	if digits == "" || !known {
		return 0, errors.New("want a whole number of bytes, optionally with a unit: B, KiB, MiB, GiB (powers of 2) or KB, MB, GB (powers of 10), e.g. 64MiB")
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > (1<<63-1)/mult {
		return 0, errors.New("too large")
	}
	return n * mult, nil
}

// namespaces reads an http source's namespaces, sorted by name; an entry
// without sink: goes to the source's.
func (c *checker) namespaces(m *mapping, sink string) []namespaceSpec {
	line := m.keys["namespaces"].Line
	where := m.where + " namespaces"
	nm, ok := c.mappingOf(m.vals["namespaces"], line, where, "a mapping of namespace to {sink: …, at_least_once: …}")
	if !ok {
		return nil
	}
	if len(nm.order) == 0 {
		c.errorf(line, m.where, "namespaces is empty, so every request would be refused; list some, or remove the key to accept any namespace")
		return nil
	}
	specs := make([]namespaceSpec, 0, len(nm.order))
	for _, name := range nm.order {
		specs = append(specs, c.namespace(m.where, name, nm.keys[name].Line, nm.vals[name], sink))
	}
	slices.SortFunc(specs, func(a, b namespaceSpec) int { return strings.Compare(a.Name, b.Name) })
	return specs
}

func (c *checker) namespace(source, name string, line int, n *yaml.Node, sink string) namespaceSpec {
	ns := namespaceSpec{Name: name, Sink: sink, Line: line}
	where := fmt.Sprintf("%s namespace %q", source, name)
	if err := sources.CheckNamespace(name); err != nil {
		c.errorf(line, source, "%v", err)
	}
	m, ok := c.mappingOf(n, line, where, "a mapping such as {sink: lake, at_least_once: true}, or nothing")
	if !ok {
		return ns
	}
	c.allow(m, namespaceKeys, "", nil)
	if s := c.sinkRef(m, false); s != "" {
		ns.Sink = s
	}
	ns.AtLeastOnce = c.boolean(m, "at_least_once")
	return ns
}

func (c *checker) filesSource(m *mapping, sink string) *filesSourceSpec {
	f := &filesSourceSpec{}
	p, line, ok := c.text(m, "path", true, "a directory to take files from; relative to this file's directory")
	if ok {
		f.Path = c.resolve(p)
		c.filePaths = append(c.filePaths, located{value: filepath.Clean(f.Path), shown: p, where: m.where, line: line})
	}
	f.pollSpec = c.pollSpec(m, sink, defaultFilesPoll)
	return f
}

func (c *checker) objectsSource(m *mapping, sink string) *objectsSourceSpec {
	o := &objectsSourceSpec{Bucket: c.bucket(m)}
	prefix, line, _ := c.str(m, "prefix")
	o.Prefix = prefix
	if strings.HasPrefix(prefix, "/") {
		c.errorf(line, m.where, "prefix %q: S3 keys do not start with /; write %q", prefix, strings.TrimLeft(prefix, "/"))
	}
	if line == 0 {
		line = m.line
	}
	if o.Bucket != "" {
		c.objectPaths = append(c.objectPaths, located{value: o.Bucket + "/" + prefix, where: m.where, line: line})
	}
	o.pollSpec = c.pollSpec(m, sink, defaultObjectsPoll)
	return o
}

// defaultPublication is the publication a postgres-cdc source uses
// unless it names one.
const defaultPublication = "skipprd"

func (c *checker) pgcdcSource(m *mapping, name, sink string) *pgcdcSourceSpec {
	p := &pgcdcSourceSpec{URLEnv: c.envRef(m, "url_env", true, "SKIPPR_PG_SOURCE_URL")}
	p.Publication, _ = c.pgObject(m, "publication", defaultPublication)
	slot, line := c.pgObject(m, "slot", "skipprd_"+strings.ReplaceAll(name, "-", "_"))
	p.Slot = slot
	if line == 0 && !pgObject.MatchString(slot) {
		c.errorf(m.line, m.where, "the default slot %q is too long; name one with slot:", slot)
	}
	c.slots = append(c.slots, located{value: slot, shown: slot, where: m.where, line: max(line, m.line)})
	p.Tables = c.tables(m, sink)
	return p
}

func (c *checker) kafkaSource(m *mapping, sink string) *kafkaSourceSpec {
	k := &kafkaSourceSpec{}
	k.Brokers = c.list(m, "brokers", "host:port of one or more brokers, e.g. [kafka-1:9092, kafka-2:9092]", checkBroker)
	c.kafkaTopics(m, k)
	if ns, line, ok := c.text(m, "namespace", false, "the namespace every topic's rows go to"); ok {
		if err := sources.CheckNamespace(ns); err != nil {
			c.errorf(line, m.where, "%v", err)
		} else {
			k.Namespace = ns
			c.writers = append(c.writers, writer{ns, sink, located{where: m.where, line: line}})
		}
	} else {
		// A regex's topics, and so their namespaces, are known only when
		// the source runs; it stops on two that would share one.
		for _, t := range k.Topics {
			ns := kafka.NamespaceOf(t)
			if err := sources.CheckNamespace(ns); err != nil {
				c.errorf(m.line, m.where, "topic %q: %v; set namespace: to choose one", t, err)
				continue
			}
			c.writers = append(c.writers, writer{ns, sink, located{where: m.where, line: m.line}})
		}
	}
	if g, line, ok := c.text(m, "group", false, "a consumer group id, e.g. skipprd-orders"); ok {
		if err := kafka.CheckGroup(g); err != nil {
			c.errorf(line, m.where, "%v", err)
		}
		k.Group = g
	}
	k.Format = c.oneOf(m, "format", kafkaFormats, false, kafka.FormatJSON)
	k.Start = c.oneOf(m, "start", kafkaStarts, false, kafka.StartEarliest)
	k.OnGap = c.oneOf(m, "on_gap", kafkaOnGaps, false, kafka.OnGapStop)
	k.ReadCommitted = c.boolean(m, "read_committed")
	k.TLS = c.boolean(m, "tls")
	k.SASLMechanism = c.oneOf(m, "sasl_mechanism", kafkaSASLs, false, "")
	if k.SASLMechanism != "" {
		k.SASLUserEnv = c.envRef(m, "sasl_user_env", true, "KAFKA_USER")
		k.SASLPassEnv = c.envRef(m, "sasl_password_env", true, "KAFKA_PASSWORD")
	}
	return k
}

// kafkaTopics reads topics or, exclusive with it, topic_regex.
func (c *checker) kafkaTopics(m *mapping, k *kafkaSourceSpec) {
	re, line, hasRegex := c.str(m, "topic_regex")
	_, hasTopics := m.vals["topics"]
	switch {
	case hasRegex && hasTopics:
		c.errorf(line, m.where, "topics and topic_regex: give one, not both")
	case hasRegex && strings.TrimSpace(re) == "":
		c.errorf(line, m.where, "topic_regex is empty; give a regular expression matching whole topic names, e.g. 'shop\\..*'")
	case hasRegex:
		if _, err := kafka.CompileTopicRegex(re); err != nil {
			c.errorf(line, m.where, "%v", err)
		}
		k.TopicRegex = re
	case line == 0:
		k.Topics = c.list(m, "topics", "topic names, e.g. [orders, payments], or a topic_regex", kafka.CheckTopic)
	}
}

func (c *checker) natsSource(m *mapping, sink string) *natsSourceSpec {
	n := &natsSourceSpec{}
	if u, line, ok := c.text(m, "url", true, "the server, e.g. nats://127.0.0.1:4222"); ok {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
			c.errorf(line, m.where, "url %q: want nats://host:port (or tls://host:port)", u)
		}
		n.URL = u
	}
	if st, line, ok := c.text(m, "stream", true, "a JetStream stream name, e.g. ORDERS"); ok {
		if err := natsjs.CheckStream(st); err != nil {
			c.errorf(line, m.where, "%v", err)
		} else {
			n.Stream = st
		}
	}
	if _, present := m.vals["subjects"]; present {
		n.Subjects = c.list(m, "subjects", "subjects of the stream, e.g. [orders.eu.>]", func(v string) error {
			if strings.ContainsAny(v, " \t") {
				return fmt.Errorf("a subject has no spaces")
			}
			return nil
		})
	}
	ns, line, ok := c.text(m, "namespace", false, "the namespace every message goes to")
	switch {
	case ok:
		n.Namespace = ns
	case n.Stream != "":
		ns, line = natsjs.NamespaceOf(n.Stream), m.line
	}
	if ns != "" {
		if err := sources.CheckNamespace(ns); err != nil {
			c.errorf(line, m.where, "%v; set namespace: to choose one", err)
		} else {
			c.writers = append(c.writers, writer{ns, sink, located{where: m.where, line: line}})
		}
	}
	n.Format = c.oneOf(m, "format", kafkaFormats, false, natsjs.FormatJSON)
	n.Start = c.oneOf(m, "start", natsStarts, false, natsjs.StartFirst)
	n.OnGap = c.oneOf(m, "on_gap", kafkaOnGaps, false, natsjs.OnGapStop)
	c.natsCredentials(m, n)
	return n
}

// natsCredentials reads a nats source's credentials: creds_file, or
// username_env with password_env, or token_env — at most one kind.
func (c *checker) natsCredentials(m *mapping, n *natsSourceSpec) {
	if f, _, ok := c.text(m, "creds_file", false, "a .creds file (JWT and NKey seed)"); ok {
		n.CredsFile = f // read at start (natsCredentials): the file may live only on the daemon's host
	}
	n.UsernameEnv = c.envRef(m, "username_env", false, "NATS_USER")
	n.PasswordEnv = c.envRef(m, "password_env", false, "NATS_PASSWORD")
	n.TokenEnv = c.envRef(m, "token_env", false, "NATS_TOKEN")
	if (n.UsernameEnv == "") != (n.PasswordEnv == "") {
		c.errorf(m.line, m.where, "username_env and password_env go together")
	}
	kinds := 0
	for _, v := range []string{n.CredsFile, n.UsernameEnv, n.TokenEnv} {
		if v != "" {
			kinds++
		}
	}
	if kinds > 1 {
		c.errorf(m.line, m.where, "creds_file, username_env/password_env and token_env: at most one")
	}
}

func (c *checker) mqttSource(m *mapping, sink string) *mqttSourceSpec {
	q := &mqttSourceSpec{}
	if b, line, ok := c.text(m, "broker", true, "the broker, e.g. tcp://127.0.0.1:1883"); ok {
		if !strings.Contains(b, "://") {
			c.errorf(line, m.where, "broker %q: want scheme://host:port, e.g. tcp://127.0.0.1:1883", b)
		}
		q.Broker = b
	}
	q.Topics = c.list(m, "topics", "topic filters, e.g. [sensors/+/temperature]", mqtt.CheckFilter)
	q.Namespace = c.fixedNamespace(m, sink)
	q.Format = c.oneOf(m, "format", kafkaFormats, false, mqtt.FormatJSON)
	if id, line, ok := c.text(m, "id_field", false, "the JSON field holding each message's id"); ok {
		if q.Format != mqtt.FormatJSON {
			c.errorf(line, m.where, "id_field %q needs format json", id)
		}
		q.IDField = id
	}
	q.UsernameEnv = c.envRef(m, "username_env", false, "MQTT_USER")
	q.PasswordEnv = c.envRef(m, "password_env", false, "MQTT_PASSWORD")
	return q
}

// checkBroker checks a broker's host:port.
func checkBroker(v string) error {
	host, p, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return fmt.Errorf("want host:port, e.g. kafka-1:9092")
	}
	if port, err := strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("port %q: want a number in 1..65535", p)
	}
	return nil
}

// list reads key, a non-empty list of distinct strings each of which
// check accepts.
func (c *checker) list(m *mapping, key, hint string, check func(string) error) []string {
	n, present := m.vals[key]
	if !present {
		c.errorf(m.line, m.where, "%s is missing: want %s", key, hint)
		return nil
	}
	line := m.keys[key].Line
	if n = deref(n); n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		c.errorf(line, m.where, "%s: want a list of %s, found %s", key, hint, describe(n))
		return nil
	}
	var out []string
	for _, item := range n.Content {
		item = deref(item)
		switch {
		case item.Kind != yaml.ScalarNode:
			c.errorf(item.Line, m.where, "%s: want %s, found %s", key, hint, describe(item))
		case slices.Contains(out, item.Value):
			c.errorf(item.Line, m.where, "%s: %q is listed twice", key, item.Value)
		default:
			if err := check(item.Value); err != nil {
				c.errorf(item.Line, m.where, "%s: %q: %v", key, item.Value, err)
				continue
			}
			out = append(out, item.Value)
		}
	}
	return out
}

// pgObject reads the name of a slot or publication, def when absent;
// line is 0 then.
func (c *checker) pgObject(m *mapping, key, def string) (string, int) {
	v, line, ok := c.text(m, key, false, "1 to 63 of a-z, 0-9 and _")
	if !ok {
		return def, 0
	}
	if !pgObject.MatchString(v) {
		c.errorf(line, m.where, "%s %q: want 1 to 63 of a-z, 0-9 and _ (Postgres takes it unquoted)", key, v)
	}
	return v, line
}

// tables reads a postgres-cdc source's tables: schema.table each, whose
// table name is the namespace its rows go to.
func (c *checker) tables(m *mapping, sink string) []string {
	n, present := m.vals["tables"]
	if !present {
		return nil
	}
	line := m.keys["tables"].Line
	if n = deref(n); n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		c.errorf(line, m.where, "tables: want a list of schema.table, e.g. [public.orders], found %s; or remove the key to capture every table of the publication", describe(n))
		return nil
	}
	var out []string
	for _, item := range n.Content {
		item = deref(item)
		if item.Kind != yaml.ScalarNode {
			c.errorf(item.Line, m.where, "tables: want schema.table, found %s", describe(item))
			continue
		}
		schema, table, ok := strings.Cut(item.Value, ".")
		if !ok {
			c.errorf(item.Line, m.where, "table %q: want schema.table, e.g. public.%s", item.Value, item.Value)
			continue
		}
		bad := false
		for _, part := range []string{schema, table} {
			if err := sources.CheckNamespace(part); err != nil {
				c.errorf(item.Line, m.where, "table %q: %v", item.Value, err)
				bad = true
			}
		}
		if !bad {
			out = append(out, item.Value)
			c.writers = append(c.writers, writer{table, sink, located{where: m.where, line: item.Line}})
		}
	}
	return out
}

// pollSpec reads what files and objects sources share, and records the
// namespace they write for the duplicate check.
func (c *checker) pollSpec(m *mapping, sink string, poll time.Duration) pollSpec {
	p := pollSpec{Namespace: c.fixedNamespace(m, sink), Format: c.oneOf(m, "format", formats, false, defaultFormat)}
	p.Poll, _ = c.duration(m, "poll", pollRange, poll)
	p.OnError = c.oneOf(m, "on_error", onErrors, false, defaultOnError)
	p.Order = c.oneOf(m, "order", orders, false, objects.OrderAny)
	settle, set := c.duration(m, "settle", settleRange, objects.DefaultSettle)
	if set && p.Order != objects.OrderKeys {
		c.errorf(m.vals["settle"].Line, m.where, "settle applies to order: keys only (order is %s)", p.Order)
	}
	p.Settle = settle
	p.InFlight = c.count(m, "in_flight", 1, objects.InFlightMax, objects.DefaultInFlight)
	return p
}

// count reads key, a whole number in lo..hi; def when absent or wrong
// (reported).
func (c *checker) count(m *mapping, key string, lo, hi, def int) int {
	v, line, ok := c.text(m, key, false, fmt.Sprintf("a number %d..%d", lo, hi))
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		c.errorf(line, m.where, "%s %q: want a whole number %d..%d", key, v, lo, hi)
		return def
	}
	return n
}

// fixedNamespace reads the namespace a files or objects source writes,
// and records it for the duplicate check.
func (c *checker) fixedNamespace(m *mapping, sink string) string {
	ns, line, ok := c.text(m, "namespace", true, "the namespace every row goes to, e.g. drops")
	if !ok {
		return ""
	}
	if err := sources.CheckNamespace(ns); err != nil {
		c.errorf(line, m.where, "%v", err)
		return ""
	}
	c.writers = append(c.writers, writer{ns, sink, located{where: m.where, line: line}})
	return ns
}

// duration reads key, a duration within r; def when absent or wrong
// (reported). set says the file gave a valid value.
func (c *checker) duration(m *mapping, key string, r durationRange, def time.Duration) (d time.Duration, set bool) {
	v, line, ok := c.text(m, key, false, "a duration, e.g. "+r.example)
	if !ok {
		return def, false
	}
	d, err := r.parse(v)
	if err != nil {
		c.errorf(line, m.where, "%s", valueProblem(key, v, err))
		return def, false
	}
	return d, true
}

// crossCheck runs the checks that span entries.
func (c *checker) crossCheck(p *pipelineFile) {
	c.checkRefs(p)
	c.checkUnique(p)
	c.checkListens()
	c.checkWriters()
	c.checkOverlaps(p)
}

// checkRefs: every sink: names a sink, and every sink is named.
func (c *checker) checkRefs(p *pipelineFile) {
	defined := make([]string, len(p.Sinks))
	for i, s := range p.Sinks {
		defined[i] = s.Name
	}
	used := map[string]bool{}
	for _, r := range c.refs {
		used[r.value] = true
		// With no sink at all (reported already) every reference would be
		// an error: say nothing of them.
		if _, ok := p.sink(r.value); !ok && len(p.Sinks) > 0 {
			c.errorf(r.line, r.where, "sink %q is not defined (defined: %s)", r.value, strings.Join(defined, ", "))
		}
	}
	if !c.refsComplete || len(p.Sources) == 0 {
		return // a source without its sink: a sink may only look unused
	}
	for _, s := range p.Sinks {
		if !used[s.Name] {
			c.errorf(s.Line, "sinks", "sink %q is never used: no source or namespace writes to it; remove it, or name it in a source's sink:", s.Name)
		}
	}
}

// checkUnique: source names, and the places sources read and sinks
// write, each appear once.
func (c *checker) checkUnique(p *pipelineFile) {
	names := map[string]sourceSpec{}
	for i, s := range p.Sources {
		if s.Name == "" {
			continue
		}
		if first, dup := names[s.Name]; dup {
			c.errorf(s.Line, fmt.Sprintf("sources[%d] %q", i, s.Name), "name %q is already the name of the source on line %d; source names must be unique", s.Name, first.Line)
			continue
		}
		names[s.Name] = s
	}
	c.duplicates(c.filePaths, "path %q is also the directory of %s (line %d): both would take the same files")
	c.duplicates(c.slots, "slot %q is also the slot of %s (line %d): a slot streams to one reader")
	dirs := []located{}
	for _, s := range p.Sinks {
		if s.Kind == sinkParquetDir && s.Path != "" {
			dirs = append(dirs, located{value: filepath.Clean(s.Path), shown: s.Path, where: fmt.Sprintf("sink %q", s.Name), line: s.Line})
		}
		// Iceberg sinks may share a warehouse folder (one catalog, each
		// sink its own marks), but not with a Parquet folder.
		if s.Kind == sinkIceberg && s.Iceberg != nil && s.Iceberg.Bucket == "" {
			dirs = append(dirs, located{value: filepath.Clean(s.Iceberg.Warehouse), shown: s.Iceberg.Warehouse, where: fmt.Sprintf("sink %q", s.Name), line: s.Line, kind: sinkIceberg})
		}
	}
	slices.SortFunc(dirs, func(a, b located) int { return cmp.Compare(a.line, b.line) }) // the later one is the duplicate
	for i, d := range dirs {
		for _, e := range dirs[:i] {
			if d.value == e.value && (d.kind != sinkIceberg || e.kind != sinkIceberg) {
				c.errorf(d.line, d.where, "path %q is also the path of %s (line %d): two sinks would write one folder", d.shown, e.where, e.line)
				break
			}
		}
	}
}

// duplicates reports each entry of l whose value an earlier one has;
// msg takes the value as written, the earlier one's where and line.
func (c *checker) duplicates(l []located, msg string) {
	seen := map[string]located{}
	for _, e := range l {
		if first, dup := seen[e.value]; dup {
			c.errorf(e.line, e.where, msg, e.shown, first.where, first.line)
			continue
		}
		seen[e.value] = e
	}
}

// checkListens: two http sources cannot bind one address; a wildcard host
// clashes with every host on its port. Port 0 never clashes.
func (c *checker) checkListens() {
	for i, a := range c.listens {
		for _, b := range c.listens[:i] {
			if a.port != 0 && a.port == b.port && (a.host == b.host || wildcard(a.host) || wildcard(b.host)) {
				c.errorf(a.at.line, a.at.where, "listen %s clashes with %s of %s (line %d); give each http source its own port",
					a.at.shown, b.at.shown, b.at.where, b.at.line)
				break
			}
		}
	}
}

func wildcard(host string) bool {
	a, err := netip.ParseAddr(host)
	return host == "" || err == nil && a.IsUnspecified()
}

// checkWriters: two sources with fixed namespaces (files, objects,
// generator) must not feed one namespace of one sink — their offsets and
// rows would interleave in one table. http namespaces are named by
// requests, so only the fixed ones are compared.
func (c *checker) checkWriters() {
	type key struct{ namespace, sink string }
	seen := map[key]writer{}
	reported := map[[2]string]bool{} // two generators clash on four namespaces: say it once
	for _, w := range c.writers {
		k := key{w.namespace, w.sink}
		first, dup := seen[k]
		switch {
		case w.sink == "":
		case !dup:
			seen[k] = w
		case !reported[[2]string{first.at.where, w.at.where}]:
			reported[[2]string{first.at.where, w.at.where}] = true
			c.errorf(w.at.line, w.at.where, "namespace %q of sink %q is already written by %s (line %d); give one of them another namespace or sink",
				w.namespace, w.sink, first.at.where, first.at.line)
		}
	}
}

// checkOverlaps: objects sources must not read the same keys, nor the
// keys a parquet-s3 sink writes (they would ingest the lake's own files,
// forever).
func (c *checker) checkOverlaps(p *pipelineFile) {
	for i, a := range c.objectPaths {
		for _, b := range c.objectPaths[:i] {
			if overlap(a.value, b.value) {
				c.errorf(a.line, a.where, "bucket and prefix %q overlap %q of %s (line %d): both would take the same objects", a.value, b.value, b.where, b.line)
			}
		}
		for _, s := range p.Sinks {
			if s.Kind != sinkParquetS3 || s.Bucket == "" {
				continue
			}
			written := s.Bucket + "/" // the sink trims the prefix's slashes (sinks.ObjectKey)
			if p := strings.Trim(s.Prefix, "/"); p != "" {
				written += p + "/"
			}
			if overlap(a.value, written) {
				c.errorf(a.line, a.where, "bucket and prefix %q overlap sink %q's %q: the source would ingest the lake's own files", a.value, s.Name, written)
			}
		}
	}
}

// overlap reports whether two bucket/prefix strings can name one key.
func overlap(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

// deref resolves an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "found …".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!null":
		return "nothing"
	case "!!bool":
		return "the boolean " + n.Value
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!str":
		return strconv.Quote(n.Value)
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), n.Value)
}
