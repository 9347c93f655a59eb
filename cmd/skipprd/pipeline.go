package main

// The pipeline file (its path in SKIPPR_CONFIG; without one the daemon
// runs defaultPipelineFile): which sources run and which sinks they write
// to, plus a few settings that mirror environment variables.
// skipprd.example.yaml at the repository root documents every key.
//
// The whole file is checked before anything starts, and every problem is
// reported at once, each with the file, the line, where in the document
// and the values involved, so an operator fixes the file in one go. The
// YAML is decoded into yaml.Node and walked here rather than unmarshalled
// into structs: that is what gives every message a line, lets an unknown
// key be named with the keys allowed in its place, and lets a key that
// belongs to another kind be told apart from a typo.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sinks/iceberg"
	"github.com/skipprd/skipprd/sources/kafka"
	"github.com/skipprd/skipprd/sources/natsjs"
	"github.com/skipprd/skipprd/sources/objects"
)

const (
	// pipelineFileMax bounds the read: a pipeline is a screenful, so a
	// larger file is a wrong path (a log, a Parquet file), not a config.
	pipelineFileMax = 1 << 20
	// pipelineErrorsMax: past this many, the rest are counted, not listed.
	pipelineErrorsMax = 20

	defaultListen      = "127.0.0.1:8080" // loopback: exposing ingest is a decision, not a default
	defaultBodyMax     = 64 << 20
	defaultFilesPoll   = 2 * time.Second
	defaultObjectsPoll = 10 * time.Second // every poll is a billed LIST request
	defaultFormat      = "auto"
	defaultOnError     = "stop"
)

// The bounds of sizes and durations in the file.
var (
	bodyMaxRange = sizeRange{min: 1 << 10, max: 1 << 30, shown: "1KiB (1024) .. 1GiB (1073741824)", example: "64MiB"}
	pollRange    = durationRange{min: 100 * time.Millisecond, max: time.Hour, shown: "100ms..1h", example: "2s or 500ms"}
	settleRange  = durationRange{min: time.Second, max: 24 * time.Hour, shown: "1s..24h", example: "1m or 10m"}
)

// Sink and source kinds.
const (
	sinkParquetDir  = "parquet-dir"
	sinkParquetS3   = "parquet-s3"
	sinkPostgres    = "postgres"
	sinkIceberg     = "iceberg"
	sourceHTTP      = "http"
	sourceFiles     = "files"
	sourceObjects   = "objects"
	sourceGenerator = "generator"
	sourcePGCDC     = "postgres-cdc"
	sourceKafka     = "kafka"
	sourceNATS      = "nats"
	sourceMQTT      = "mqtt"
)

// The keys each mapping takes, in the order messages list them. A kind's
// keys come after the common ones.
var (
	topKeys       = []string{"settings", "sinks", "sources"}
	settingsKeys  = []string{"data_dir", "wal_storage"}
	sinkCommon    = []string{"kind"}
	sourceCommon  = []string{"name", "kind", "sink"}
	namespaceKeys = []string{"sink", "at_least_once"}
	sinkKinds     = []string{sinkParquetDir, sinkParquetS3, sinkPostgres, sinkIceberg}
	sourceKinds   = []string{sourceHTTP, sourceFiles, sourceObjects, sourceGenerator, sourcePGCDC, sourceKafka, sourceNATS, sourceMQTT}
	sinkKeys      = map[string][]string{ // each kind's own, then laneKeys
		sinkParquetDir: slices.Concat([]string{"path"}, laneKeys),
		sinkParquetS3:  slices.Concat([]string{"bucket", "prefix"}, laneKeys),
		sinkPostgres:   slices.Concat([]string{"url_env", "schema"}, laneKeys),
		sinkIceberg:    slices.Concat(icebergKeys, laneKeys),
	}
	sourceKeys = map[string][]string{
		sourceHTTP:      {"listen", "token_env", "body_max_bytes", "namespaces"},
		sourceFiles:     {"path", "namespace", "format", "poll", "on_error", "order", "settle", "in_flight"},
		sourceObjects:   {"bucket", "prefix", "namespace", "format", "poll", "on_error", "order", "settle", "in_flight"},
		sourceGenerator: nil,
		sourcePGCDC:     {"url_env", "publication", "slot", "tables"},
		sourceKafka: {"brokers", "topics", "topic_regex", "group", "namespace", "format", "start", "on_gap", "read_committed", "tls",
			"sasl_mechanism", "sasl_user_env", "sasl_password_env"},
		sourceNATS: {"url", "stream", "subjects", "namespace", "format", "start", "on_gap", "creds_file", "username_env", "password_env", "token_env"},
		sourceMQTT: {"broker", "topics", "namespace", "format", "id_field", "username_env", "password_env"},
	}
	walStorages  = []string{string(walDisk), string(walEmbedded), string(walS3)}
	formats      = []string{"auto", "jsonl", "csv", "parquet"}
	onErrors     = []string{"stop", "skip"}
	orders       = []string{objects.OrderAny, objects.OrderKeys}
	kafkaFormats = []string{kafka.FormatJSON, kafka.FormatText, kafka.FormatBytes}
	kafkaStarts  = []string{kafka.StartEarliest, kafka.StartLatest}
	kafkaOnGaps  = []string{kafka.OnGapStop, kafka.OnGapSkip}
	kafkaSASLs   = []string{"plain", "scram-sha-256", "scram-sha-512"}
	natsStarts   = []string{natsjs.StartFirst, natsjs.StartNew}
)

var (
	// specName: sink and source names; they appear in logs, metrics and
	// (sinks) as the engine's sink_ref.
	specName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	envName  = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	// bucketName: S3's rules for new buckets (MinIO follows them).
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// pgObject: a replication slot or publication name, which Postgres
	// takes unquoted.
	pgObject = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	// pgSchema: a Postgres schema the sink writes to, unquoted-identifier style.
	pgSchema   = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	hostName   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
	yamlLine   = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// yamlParserProblems are the problems of yaml.v3's parser (parserc.go),
// as opposed to its scanner's: it reports them with a line counted from
// 0, one before the line meant.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// pipelineFile is a loaded, valid pipeline file.
type pipelineFile struct {
	Path     string // as given; "" for defaultPipelineFile
	Settings settingsSpec
	Sinks    []sinkSpec   // sorted by name
	Sources  []sourceSpec // in file order
	// EnvRefs are the environment variables the file names (url_env,
	// token_env, …), which must be set where the daemon runs; skipprd
	// check says which are not.
	EnvRefs []located
}

// settingsSpec mirrors environment variables; "" is unset. The
// environment wins (applySettings).
type settingsSpec struct {
	DataDir    string // DATA_DIR; a relative path is already joined to the file's directory
	WALStorage string // WAL_STORAGE
}

type sinkSpec struct {
	Name, Kind string
	Path       string // parquet-dir, as written: relative to DATA_DIR unless absolute (dir)
	Bucket     string // parquet-s3
	Prefix     string // parquet-s3; "" for the bucket's root
	URLEnv     string // postgres: the environment variable holding the postgres:// URL
	Schema     string // postgres: the tables' schema
	Iceberg    *icebergSpec
	Lanes      laneSpec
	// Limits are the lanes' limits in effect: Lanes over the defaults,
	// set at start-up by resolveLanes (zero until then).
	Limits engine.LaneLimits
	Line   int
}

// sourceSpec is one source; exactly one of HTTP, Files, Objects and
// Generator is set, by Kind.
type sourceSpec struct {
	Name, Kind string
	Sink       string // http: the sink of namespaces not listed; others: of every row
	Line       int
	HTTP       *httpSourceSpec
	Files      *filesSourceSpec
	Objects    *objectsSourceSpec
	PGCDC      *pgcdcSourceSpec
	Kafka      *kafkaSourceSpec
	NATS       *natsSourceSpec
	MQTT       *mqttSourceSpec
	Generator  bool
}

// mqttSourceSpec subscribes to MQTT topic filters.
type mqttSourceSpec struct {
	Broker      string // tcp://host:port
	Topics      []string
	Namespace   string
	Format      string // json | text | bytes
	IDField     string // "": at least once
	UsernameEnv string // environment variables holding the credentials; "" for none
	PasswordEnv string
}

// natsSourceSpec reads a NATS JetStream stream.
type natsSourceSpec struct {
	URL       string // nats://host:port
	Stream    string
	Subjects  []string // nil: every message of the stream
	Namespace string   // "": natsjs.NamespaceOf(Stream)
	Format    string   // json | text | bytes
	Start     string   // first | new
	OnGap     string   // stop | skip
	// Credentials, at most one kind: a .creds file (JWT and NKey seed),
	// a user and password, or a token, the last two named by environment
	// variables. None: the server needs none.
	CredsFile                string
	UsernameEnv, PasswordEnv string
	TokenEnv                 string
}

// kafkaSourceSpec reads topics of a Kafka cluster.
type kafkaSourceSpec struct {
	Brokers       []string // host:port each
	Topics        []string // or TopicRegex, exactly one of the two
	TopicRegex    string   // matches whole topic names (kafka.CompileTopicRegex)
	Group         string   // "" for none: partitions assigned directly
	Namespace     string   // "" : each topic to a namespace of its name (kafka.NamespaceOf)
	Format        string   // json | text | bytes
	Start         string   // earliest | latest
	OnGap         string   // stop | skip
	ReadCommitted bool
	TLS           bool   // TLS with the system's roots
	SASLMechanism string // "" for none; plain | scram-sha-256 | scram-sha-512
	SASLUserEnv   string // environment variables holding the SASL user and password
	SASLPassEnv   string
}

// pgcdcSourceSpec is a Postgres change-data-capture source.
type pgcdcSourceSpec struct {
	URLEnv      string   // the environment variable holding the postgres:// URL
	Publication string   // created FOR TABLE Tables (or FOR ALL TABLES) when missing
	Slot        string   // the logical replication slot; default skipprd_{name}
	Tables      []string // schema.table; nil: every table of the publication
}

type httpSourceSpec struct {
	Listen       string
	TokenEnv     string // "" for no token
	BodyMaxBytes int64
	Namespaces   []namespaceSpec // sorted by name; nil accepts any namespace
}

type namespaceSpec struct {
	Name        string
	Sink        string // the source's sink when the entry names none
	AtLeastOnce bool
	Line        int
}

// pollSpec is what the polling sources (files, objects) share: where
// their rows go and how they read.
type pollSpec struct {
	Namespace string
	Format    string // auto | jsonl | csv | parquet
	Poll      time.Duration
	OnError   string // stop | skip
	Order     string // any | keys
	Settle    time.Duration
	InFlight  int
}

type filesSourceSpec struct {
	Path string // a relative path is already joined to the file's directory
	pollSpec
}

type objectsSourceSpec struct {
	Bucket, Prefix string
	pollSpec
}

// pipelineError is one problem with a pipeline file. loadPipeline
// returns them joined (errors.Join).
type pipelineError struct {
	Path  string // the file, as given
	Line  int    // 1-based; 0 when it concerns the file as a whole
	Where string // "sources[1] \"api\"", "sink \"lake\"", …; "" for a syntax error
	Msg   string
	Err   error // the cause when the file could not be read (errors.Is(err, fs.ErrNotExist)); else nil
}

func (e *pipelineError) Unwrap() error { return e.Err }

func (e *pipelineError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Where != "" {
		b.WriteString(e.Where + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// defaultPipelineFile is what the daemon runs without a pipeline file:
// the generator into Iceberg tables under DATA_DIR/lake, with the SQLite
// catalog in that folder (no server to run).
func defaultPipelineFile() *pipelineFile {
	return &pipelineFile{
		Sinks: []sinkSpec{{Name: lakeSinkRef, Kind: sinkIceberg, Iceberg: &icebergSpec{Warehouse: lakeDir,
			Namespace: icebergNamespaceDefault, PartitionBy: iceberg.PartitionDefault, SnapshotsKept: iceberg.RetentionDefault.KeepLast,
			SmallFiles: iceberg.SmallFilesDefault.MinFiles}}},
		Sources: []sourceSpec{{Name: "demo", Kind: sourceGenerator, Sink: lakeSinkRef, Generator: true}},
	}
}

// sink returns the sink called name.
func (p *pipelineFile) sink(name string) (sinkSpec, bool) {
	i, ok := slices.BinarySearchFunc(p.Sinks, name, func(s sinkSpec, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return sinkSpec{}, false
	}
	return p.Sinks[i], true
}

// dir is a parquet-dir sink's folder, or an iceberg sink's warehouse
// folder: its path, under dataDir unless absolute.
func (s sinkSpec) dir(dataDir string) string {
	if s.Iceberg != nil {
		return s.Iceberg.folder(dataDir)
	}
	if filepath.IsAbs(s.Path) {
		return s.Path
	}
	return filepath.Join(dataDir, s.Path)
}

// applySettings returns a getenv answering the file's settings for the
// variables they mirror when the environment leaves them unset or blank,
// so parseConfig reads both unchanged and the environment wins.
func (p *pipelineFile) applySettings(getenv func(string) string) func(string) string {
	file := map[string]string{envDataDir: p.Settings.DataDir, envWALStorage: p.Settings.WALStorage}
	return func(name string) string {
		v := getenv(name)
		if strings.TrimSpace(v) == "" && file[name] != "" {
			return file[name]
		}
		return v
	}
}

// loadPipeline reads and checks the pipeline file at path. Every error
// is a *pipelineError, joined with errors.Join.
func loadPipeline(path string) (*pipelineFile, error) {
	data, err := readBounded(path, pipelineFileMax)
	if err != nil {
		msg := err.Error()
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			msg = fmt.Sprintf("cannot %s it: %v", pe.Op, pe.Err) // the path is named already
		}
		return nil, errors.Join(&pipelineError{Path: path, Msg: msg, Err: err})
	}
	return parsePipeline(path, data)
}

// readBounded reads at most max bytes of path, and fails if there are
// more.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes (1 MiB): not a pipeline file", max)
	}
	return data, nil
}

// parsePipeline checks data, the content of the file at path. With an
// error, the file read so far is returned too (nil if it did not parse
// as YAML): it must not be run.
func parsePipeline(path string, data []byte) (*pipelineFile, error) {
	root, err := parseYAML(path, data)
	if err != nil {
		return nil, errors.Join(err)
	}
	c := &checker{path: path, dir: filepath.Dir(path)}
	p := c.document(root)
	c.crossCheck(p)
	p.EnvRefs = c.envRefs
	if err := c.result(); err != nil {
		return p, err // partial: skipprd check still reads its EnvRefs
	}
	return p, nil
}

// parseYAML parses the one document of data; its errors carry the
// parser's line.
func parseYAML(path string, data []byte) (*yaml.Node, *pipelineError) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, &pipelineError{Path: path, Msg: "the file is empty; want sinks and sources (see skipprd.example.yaml)"}
	case err != nil:
		return nil, syntaxError(path, data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(path, data, err)
	default:
		return nil, &pipelineError{Path: path, Line: next.Line, Msg: "a second YAML document (after ---); want one"}
	}
	if len(doc.Content) == 0 {
		return nil, &pipelineError{Path: path, Msg: "the file holds no document"}
	}
	return doc.Content[0], nil
}

// syntaxError turns the parser's error into a pipelineError with the
// line it means. yaml.v3 leaves the line out when it is the first (its
// marks count from 0 and 0 reads as none), and for an undefined alias.
func syntaxError(path string, data []byte, err error) *pipelineError {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if slices.Contains(yamlParserProblems, msg) {
			line++
		}
	} else if m := yamlAnchor.FindStringSubmatch(msg); m != nil {
		line = lineOf(data, "*"+m[1])
		msg = fmt.Sprintf("alias *%s refers to no anchor &%s defined before it", m[1], m[1])
	}
	tabbed := bytes.Contains(lineBytes(data, line), []byte("\t")) || bytes.Contains(lineBytes(data, line+1), []byte("\t"))
	if tabbed && (strings.Contains(msg, "tab character") || strings.Contains(msg, "cannot start any token")) {
		msg += " (YAML indents with spaces only, never tabs)"
	}
	return &pipelineError{Path: path, Line: line, Msg: msg}
}

// lineOf is the 1-based line of the first s in data, 0 if none.
func lineOf(data []byte, s string) int {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 0
	}
	return bytes.Count(data[:i], []byte("\n")) + 1
}

// lineBytes is the 1-based line n of data.
func lineBytes(data []byte, n int) []byte {
	lines := bytes.Split(data, []byte("\n"))
	if n < 1 || n > len(lines) {
		return nil
	}
	return lines[n-1]
}
