package sqlcatalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	icego "github.com/apache/iceberg-go"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/sinks/iceberg"
)

// An env is one real setup: a catalog database and a warehouse, with a
// way to write and look at the warehouse's files directly.
type env struct {
	cfg    Config
	put    func(t testing.TB, uri string, data []byte)
	exists func(t testing.TB, uri string) bool
	// list returns the files under the folder uri, sorted.
	list func(t testing.TB, uri string) []string
}

// backends are the setups every test runs on.
var backends = []struct {
	name string
	env  func(t testing.TB) env
}{
	{"sqlite+folder", sqliteFolder},
	{"postgres+folder", postgresFolder},
	{"sqlite+s3", sqliteS3},
}

// eachBackend runs f on every backend, in parallel subtests.
func eachBackend(t *testing.T, f func(t *testing.T, e env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.env(t))
		})
	}
}

// sqliteFolder: a SQLite catalog file and a local warehouse folder.
func sqliteFolder(t testing.TB) env {
	dir := t.TempDir()
	return folderEnv(Config{URI: "sqlite://" + filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")})
}

// postgresFolder: a fresh PostgreSQL database and a local warehouse.
func postgresFolder(t testing.TB) env {
	return folderEnv(Config{URI: pgtest.Database(t), Warehouse: "file://" + t.TempDir()})
}

func folderEnv(cfg Config) env {
	path := func(uri string) string { return strings.TrimPrefix(uri, "file://") }
	return env{
		cfg: cfg,
		put: func(t testing.TB, uri string, data []byte) {
			t.Helper()
			if err := os.MkdirAll(filepath.Dir(path(uri)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path(uri), data, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		exists: func(t testing.TB, uri string) bool {
			_, err := os.Stat(path(uri))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			return err == nil
		},
		list: func(t testing.TB, uri string) []string {
			var files []string
			err := filepath.WalkDir(path(uri), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, "file://"+p)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return files
		},
	}
}

const testBucket = "skipprd-lake"

// sqliteS3: a SQLite catalog and a warehouse in gofakes3, reached by the
// real SDK the way the repo's storage tests reach it.
func sqliteS3(t testing.TB) env {
	backend := s3mem.New()
	if err := backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	awsCfg := aws.Config{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDSKIPPRDTEST", "skipprd-test-secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.UsePathStyle = true
	})
	key := func(t testing.TB, uri string) string {
		k, ok := strings.CutPrefix(uri, "s3://"+testBucket+"/")
		if !ok {
			t.Fatalf("%s is not in bucket %s", uri, testBucket)
		}
		return k
	}
	return env{
		cfg: Config{
			URI:       "sqlite://" + filepath.Join(t.TempDir(), "catalog.db"),
			Warehouse: "s3://" + testBucket + "/warehouse/",
			AWS:       &awsCfg, S3PathStyle: true, S3Endpoint: srv.URL,
		},
		put: func(t testing.TB, uri string, data []byte) {
			t.Helper()
			_, err := client.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(testBucket), Key: aws.String(key(t, uri)), Body: bytes.NewReader(data)})
			if err != nil {
				t.Fatal(err)
			}
		},
		exists: func(t testing.TB, uri string) bool {
			_, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{
				Bucket: aws.String(testBucket), Key: aws.String(key(t, uri))})
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NotFound" {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			return true
		},
		list: func(t testing.TB, uri string) []string {
			var files []string
			p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{
				Bucket: aws.String(testBucket), Prefix: aws.String(key(t, uri) + "/")})
			for p.HasMorePages() {
				page, err := p.NextPage(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range page.Contents {
					files = append(files, "s3://"+testBucket+"/"+*o.Key)
				}
			}
			slices.Sort(files)
			return files
		},
	}
}

// open opens a catalog on e, closed when t ends.
func open(t testing.TB, e env) *Catalog {
	t.Helper()
	c, err := Open(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// Field ids deliberately not in the order Iceberg would number a fresh
// schema (1, 2, 3, …), so a renumbering shows.
const (
	idID     = 3
	idName   = 7
	idN      = 4
	idRatio  = 6
	idIngest = 5
)

// testSchema is the table every test creates.
func testSchema() *icego.Schema {
	return icego.NewSchema(0,
		icego.NestedField{ID: idID, Name: "id", Type: icego.PrimitiveTypes.Int64, Required: true},
		icego.NestedField{ID: idName, Name: "name", Type: icego.PrimitiveTypes.String},
		icego.NestedField{ID: idN, Name: "n", Type: icego.PrimitiveTypes.Int32},
		icego.NestedField{ID: idRatio, Name: "ratio", Type: icego.PrimitiveTypes.Float32},
		icego.NestedField{ID: idIngest, Name: "_ingested_at", Type: icego.PrimitiveTypes.TimestampTz, Required: true},
	)
}

var testSpec = iceberg.PartitionSpec{SourceColumn: "_ingested_at"}

// create makes table ns.name with the test schema.
func create(t testing.TB, c *Catalog, name string, props map[string]string) *iceberg.Table {
	t.Helper()
	tbl, err := c.Create(context.Background(), iceberg.Ident{Namespace: "lake", Name: name}, testSchema(), testSpec, props)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// load loads id or fails t.
func load(t testing.TB, c *Catalog, id iceberg.Ident) *iceberg.Table {
	t.Helper()
	tbl, err := c.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// A row of the test table.
type row struct {
	ID   int64
	Name string // "" is null
}

// day0 is the day every test row is ingested on.
var day0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

var fileSeq atomic.Int64

// writeFile writes rows as a Parquet data file under tbl's data folder,
// its columns carrying tbl's field ids, and returns it as Append wants it.
func writeFile(t testing.TB, e env, tbl *iceberg.Table, rows []row) iceberg.DataFile {
	t.Helper()
	fields := []arrow.Field{
		idField(tbl, "id", arrow.PrimitiveTypes.Int64, false),
		idField(tbl, "name", arrow.BinaryTypes.String, true),
		idField(tbl, "_ingested_at", arrow.FixedWidthTypes.Timestamp_us, false),
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	nulls := int64(0)
	for i, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.ID)
		if r.Name == "" {
			b.Field(1).AppendNull()
			nulls++
		} else {
			b.Field(1).(*array.StringBuilder).Append(r.Name)
		}
		ts := day0.Add(time.Duration(i) * time.Second)
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	tab := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	defer tab.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(tab, &buf, 1024, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("%s/data/_ingested_at_day=%s/part-%05d.parquet", tbl.Location, day0.Format(time.DateOnly), fileSeq.Add(1))
	e.put(t, path, buf.Bytes())
	n := int64(len(rows))
	return iceberg.DataFile{
		Path: path, Rows: n, Bytes: int64(buf.Len()), Day: int32(day0.Unix() / 86400),
		Columns: map[int]iceberg.ColumnStats{
			idID: {Values: n}, idName: {Values: n, Nulls: nulls}, idIngest: {Values: n},
		},
	}
}

// idField is the Arrow field of column name, with its field id in tbl.
func idField(tbl *iceberg.Table, name string, typ arrow.DataType, nullable bool) arrow.Field {
	f, ok := tbl.Schema.FindFieldByName(name)
	if !ok {
		panic("no column " + name)
	}
	return arrow.Field{Name: name, Type: typ, Nullable: nullable,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(f.ID)})}
}

// scan reads table id with iceberg-go's own reader, rows by id.
func scan(t *testing.T, c *Catalog, id iceberg.Ident) []row {
	t.Helper()
	ctx := c.withAWS(context.Background())
	tbl, err := c.cat.LoadTable(ctx, ident(id))
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	var rows []row
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		names := rec.Column(rec.Schema().FieldIndices("name")[0]).(*array.String)
		for i := range int(rec.NumRows()) {
			r := row{ID: ids.Value(i)}
			if names.IsValid(i) {
				r.Name = names.Value(i)
			}
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return int(a.ID - b.ID) })
	return rows
}

// dataFiles lists the data files of table id's current snapshot, as
// iceberg-go plans a scan of it.
func dataFiles(t *testing.T, c *Catalog, id iceberg.Ident) []string {
	t.Helper()
	ctx := c.withAWS(context.Background())
	tbl, err := c.cat.LoadTable(ctx, ident(id))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, task := range tasks {
		paths = append(paths, task.File.FilePath())
	}
	slices.Sort(paths)
	return paths
}

// appendRetrying appends f, reloading and appending again on conflicts;
// it returns how many conflicts it met.
func appendRetrying(t *testing.T, c *Catalog, id iceberg.Ident, f iceberg.DataFile) int {
	conflicts := 0
	for {
		tbl, err := c.Load(context.Background(), id)
		if err != nil {
			t.Error(err)
			return conflicts
		}
		err = c.Append(context.Background(), tbl, iceberg.Append{Files: []iceberg.DataFile{f},
			Summary: map[string]string{"skipprd.file": f.Path}})
		if err == nil {
			return conflicts
		}
		if !errors.Is(err, iceberg.ErrConflict) {
			t.Errorf("append %s: %v (neither landed nor a conflict)", f.Path, err)
			return conflicts
		}
		if conflicts == 0 {
			t.Logf("first conflict: %v", err)
		}
		conflicts++
	}
}
