package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/skipprd/skipprd/internal/nodetest"
)

// What a new user does, as the README says it: the five-line pipeline
// file from the README, the README's curl (its exact body, key and
// answer), a CSV file dropped into the folder, then more bodies and files
// whose schemas grow — a new field, an integer field that turns float, a
// new CSV column — and, after a graceful stop, the lake read back the
// way a user would: every row, every field, once (in Go, and in DuckDB
// with union_by_name).
func TestDaemonNewUser(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon")
	t.Parallel()
	readme := readRepoFile(t, "README.md")
	block := readmePipeline(t, readme)
	if example := readRepoFile(t, "skipprd.example.yaml"); !strings.Contains(example, block) {
		t.Fatalf("the README's pipeline file is not the one skipprd.example.yaml starts with:\n%s", block)
	}
	for _, s := range []string{newUserBody, newUserAnswer, newUserCSVShell} {
		if !strings.Contains(readme, s) {
			t.Fatalf("the README no longer shows %q; keep this test and it in step", s)
		}
	}
	conf, dataDir := t.TempDir(), t.TempDir()
	listen := "kind: http, sink: lake, listen: \"127.0.0.1:0\"}" // port 8080 may be taken
	writeFile(t, filepath.Join(conf, "skipprd.yaml"), strings.Replace(block, "kind: http, sink: lake}", listen, 1))
	if err := os.Mkdir(filepath.Join(conf, "incoming"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, buildDaemon(t), dataDir, envPipelineFile+"="+filepath.Join(conf, "skipprd.yaml"))
	p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	base := "http://" + listenAddr(p.stderrLines()) + "/v1/ingest/"
	// Until recovery is done the source answers 503 with Retry-After.
	p.waitStderr(t, "ready", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })

	if got := postJSONLines(t, base+"events", "order-42", strings.ReplaceAll(newUserBody, `\n`, "\n")); got != newUserAnswer {
		t.Fatalf("the README's curl was answered %s, the README says %s", got, newUserAnswer)
	}
	dropInto(t, conf, "orders.csv", "sku,amount\nA-1,3\nB-2,4.5\n")
	postJSONLines(t, base+"events", "order-44", `{"id":44,"total":2.25,"coupon":"WINTER","qty":2}`+"\n")
	postJSONLines(t, base+"events", "order-45", `{"id":45,"total":1,"qty":0.5}`+"\n")
	dropInto(t, conf, "orders-2.csv", "sku,amount,region\nC-3,7,eu\n")
	p.waitStdout(t, "the 7 rows acked", func(lines []string) bool {
		pr, ok := parseProgress(lastProgress(lines))
		return ok && pr["acked"] >= 7
	})
	p.stop(t)

	lake := filepath.Join(dataDir, "lake")
	checkRows(t, "events", lakeRows(t, filepath.Join(lake, "events")), newUserEvents)
	checkRows(t, "drops", lakeRows(t, filepath.Join(lake, "drops")), newUserDrops)
	for ns, want := range map[string][]map[string]string{"events": newUserEvents, "drops": newUserDrops} {
		// DuckDB reads the p_year=/p_month=/p_day= folders as columns too.
		sql := fmt.Sprintf("SELECT * EXCLUDE (p_year, p_month, p_day) FROM read_parquet('%s/%s/**/*.parquet', union_by_name = true)", lake, ns)
		checkRows(t, ns+" (DuckDB)", duckRows(nodetest.DuckDB(t, sql)), want)
	}
}

// The README's curl body (as its $'…' string holds it), its answer, and
// its CSV drop.
const (
	newUserBody     = `{"id":42,"total":9.5,"at":"2026-12-01T10:00:00Z"}\n{"id":43,"total":3}\n`
	newUserAnswer   = `{"idempotency_key":"order-42","namespace":"events","rows":2}`
	newUserCSVShell = `printf 'sku,amount\nA-1,3\nB-2,4.5\n' > incoming/.orders.csv`
)

// The rows each namespace must hold, every column a reader unioning by
// name sees ("" is null), values as text: ints and floats as a float
// column holds them once the files are unioned (qty: 2 then 0.5).
var (
	newUserEvents = []map[string]string{
		{"id": "42", "total": "9.5", "at": "2026-12-01T10:00:00Z", "coupon": "", "qty": ""},
		{"id": "43", "total": "3", "at": "", "coupon": "", "qty": ""},
		{"id": "44", "total": "2.25", "at": "", "coupon": "WINTER", "qty": "2"},
		{"id": "45", "total": "1", "at": "", "coupon": "", "qty": "0.5"},
	}
	newUserDrops = []map[string]string{
		{"sku": "A-1", "amount": "3", "region": ""},
		{"sku": "B-2", "amount": "4.5", "region": ""},
		{"sku": "C-3", "amount": "7", "region": "eu"},
	}
)

// readmePipeline is the first YAML block of the README's pipeline-file
// section.
func readmePipeline(t *testing.T, readme string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "## Your own data")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README: no yaml block under \"## Your own data\"")
	}
	if n := strings.Count(block, "\n"); n != 5 {
		t.Fatalf("the README's pipeline file has %d lines, it says five:\n%s", n, block)
	}
	return block
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// postJSONLines posts body once and returns the 200 answer's body.
func postJSONLines(t *testing.T, url, key, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s (%s): %d %s", url, key, resp.StatusCode, answer)
	}
	return string(bytes.TrimSpace(answer))
}

// dropInto puts a file into incoming/ as the README says: written under a
// hidden name, then renamed into view.
func dropInto(t *testing.T, conf, name, text string) {
	t.Helper()
	tmp := filepath.Join(conf, "incoming", "."+name)
	writeFile(t, tmp, text)
	if err := os.Rename(tmp, filepath.Join(conf, "incoming", name)); err != nil {
		t.Fatal(err)
	}
}

// checkRows compares rows (in any order) with want, on want's columns;
// a row must have exactly those columns.
func checkRows(t *testing.T, what string, got, want []map[string]string) {
	t.Helper()
	key := func(r map[string]string) string {
		names := make([]string, 0, len(r))
		for n := range r {
			names = append(names, n)
		}
		slices.Sort(names)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s=%q ", n, r[n])
		}
		return b.String()
	}
	g, w := make([]string, len(got)), make([]string, len(want))
	for i, r := range got {
		g[i] = key(r)
	}
	for i, r := range want {
		w[i] = key(r)
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s: the lake holds\n  %s\nwant\n  %s", what, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}

// duckRows turns DuckDB's JSON rows into text the way lakeRows does.
func duckRows(rows []map[string]any) []map[string]string {
	out := make([]map[string]string, len(rows))
	for i, r := range rows {
		out[i] = map[string]string{}
		for k, v := range r {
			out[i][k] = duckText(v)
		}
	}
	return out
}

func duckText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case json.Number:
		return v.String()
	case string:
		return normalTimestamp(v)
	default:
		return fmt.Sprint(v)
	}
}

// normalTimestamp writes DuckDB's TIMESTAMPTZ text, "2026-12-01
// 10:00:00+00", as RFC 3339 in UTC; other text stays.
func normalTimestamp(s string) string {
	if ts, err := time.Parse("2006-01-02 15:04:05.999999999-07", s); err == nil {
		return ts.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// lakeRows reads every Parquet file under dir and unions them by column
// name: each row has every column any file has, "" where its file has
// none or the value is null.
func lakeRows(t *testing.T, dir string) []map[string]string {
	t.Helper()
	var rows []map[string]string
	columns := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		tbl := readParquet(t, path)
		defer tbl.Release()
		rdr := array.NewTableReader(tbl, 1<<16)
		defer rdr.Release()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			for i := range int(rec.NumRows()) {
				row := map[string]string{}
				for c, f := range rec.Schema().Fields() {
					columns[f.Name] = true
					row[f.Name] = cellText(t, rec.Column(c), i)
				}
				rows = append(rows, row)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for c := range columns {
			if _, ok := r[c]; !ok {
				r[c] = ""
			}
		}
	}
	return rows
}

// cellText is one value as text: numbers in their shortest form,
// timestamps in RFC 3339, null as "".
func cellText(t *testing.T, col arrow.Array, i int) string {
	t.Helper()
	if col.IsNull(i) {
		return ""
	}
	switch a := col.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64)
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i))
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano)
	default:
		t.Fatalf("column of type %s", col.DataType())
		return ""
	}
}
