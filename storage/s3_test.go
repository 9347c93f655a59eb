package storage

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/storetest"
)

const testBucket = "skipprd-test"

// newFakeS3 serves an empty in-memory gofakes3 with testBucket over
// plain HTTP.
func newFakeS3(t *testing.T) *httptest.Server {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return srv
}

// newTestClient is the real SDK client as docs/DESIGN.md §12 prescribes for
// gofakes3: path-style, WhenRequired checksums, static credentials. It
// does not read the environment, so the tests are hermetic.
func newTestClient(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDSKIPPRDTEST", "skipprd-test-secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// newTestStore returns a store on a running loop against endpoint.
func newTestStore(t *testing.T, endpoint string, opts S3Options) (*Loop, *S3Store) {
	t.Helper()
	l := startLoop(t)
	store := NewS3Store(l, newTestClient(endpoint), testBucket, opts)
	t.Cleanup(store.Close)
	return l, store
}

// await is storetest's Await on a production loop.
func await(t *testing.T, l *Loop) func(start func(finish func())) {
	return func(start func(finish func())) {
		if _, err := Call(l, func(done func(struct{})) { start(func() { done(struct{}{}) }) }); err != nil {
			t.Fatalf("loop: %v", err)
		}
	}
}

func TestS3StoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		// A page of 3 makes the suite's 7- and 9-key listings span pages.
		l, store := newTestStore(t, newFakeS3(t).URL, S3Options{ListPageSize: 3, RequestTimeout: 10 * time.Second})
		return storetest.Harness{Store: store, Await: await(t, l)}
	})
}

// put stores body at key through the store.
func put(t *testing.T, l *Loop, store *S3Store, key string, body []byte) {
	t.Helper()
	err, _ := Call(l, func(done func(error)) {
		store.PutObject(engine.PutObjectInput{Key: key, Body: body}, func(_ string, err error) { done(err) })
	})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// The conformance suite checks contents; this checks that a small page
// size really produced several pages, for objects and for uploads (whose
// markers are passed back verbatim).
func TestS3StoreListingsPaginate(t *testing.T) {
	l, store := newTestStore(t, newFakeS3(t).URL, S3Options{ListPageSize: 2})
	var want []string
	// 4 keys in pages of 2: exactly 2 pages. gofakes3 sends a continuation
	// token on the second page though it is the last; following it would
	// make an empty third page.
	for i := range 4 {
		key := fmt.Sprintf("p/%d", i)
		put(t, l, store, key, []byte{byte(i)})
		want = append(want, key)
	}
	var keys []string
	pages, token := 0, ""
	for pages = 1; ; pages++ {
		page, _ := Call(l, func(done func(engine.ListPage)) {
			store.ListObjects("p/", token, func(p engine.ListPage, err error) {
				if err != nil {
					t.Errorf("list page %d: %v", pages, err)
				}
				done(p)
			})
		})
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
			if o.Size != 1 || o.ETag == "" || o.LastModifiedUnixMs <= 0 {
				t.Errorf("listed object without size, ETag or time: %+v", o)
			}
		}
		if token = page.NextToken; token == "" || pages > 10 {
			break
		}
	}
	if !slices.Equal(keys, want) || pages != 2 {
		t.Fatalf("listed %q in %d pages, want %q in 2", keys, pages, want)
	}
	testUploadsPaginate(t, l, store)
}

func testUploadsPaginate(t *testing.T, l *Loop, store *S3Store) {
	// gofakes3 answers NoSuchUpload for a bucket that never had an upload.
	type result struct {
		page engine.UploadsPage
		err  error
	}
	empty, _ := Call(l, func(done func(result)) {
		store.ListMultipartUploads("u/", "", "", func(p engine.UploadsPage, err error) { done(result{p, err}) })
	})
	if empty.err != nil || len(empty.page.Uploads) != 0 || empty.page.Truncated {
		t.Fatalf("uploads of a fresh bucket: %+v %v, want an empty last page", empty.page, empty.err)
	}
	var want []string
	for _, key := range []string{"u/c", "u/a", "u/b", "u/a", "u/d"} {
		id, _ := Call(l, func(done func(string)) {
			store.CreateMultipartUpload(key, func(id string, err error) {
				if err != nil {
					t.Errorf("create %s: %v", key, err)
				}
				done(id)
			})
		})
		want = append(want, key+" "+id)
	}
	slices.Sort(want) // ids grow with creation here, so key then id order is string order
	var got []string
	km, um, pages := "", "", 0
	for pages = 1; pages <= 10; pages++ {
		page, _ := Call(l, func(done func(engine.UploadsPage)) {
			store.ListMultipartUploads("u/", km, um, func(p engine.UploadsPage, err error) {
				if err != nil {
					t.Errorf("list uploads: %v", err)
				}
				done(p)
			})
		})
		for _, u := range page.Uploads {
			got = append(got, u.Key+" "+u.UploadID)
		}
		if !page.Truncated {
			break
		}
		km, um = page.NextKeyMarker, page.NextUploadIDMarker
	}
	if !slices.Equal(got, want) || pages < 3 {
		t.Fatalf("uploads %q in %d pages, want %q in at least 3", got, pages, want)
	}
}

// A ranged GET reports the stored object's size, not the range's.
func TestS3StoreRangedGetReportsObjectSize(t *testing.T) {
	l, store := newTestStore(t, newFakeS3(t).URL, S3Options{})
	put(t, l, store, "r", []byte("0123456789"))
	type result struct {
		body []byte
		info engine.ObjectInfo
		err  error
	}
	got, _ := Call(l, func(done func(result)) {
		store.GetObject(engine.GetObjectInput{Key: "r", Range: &engine.ByteRange{Start: 8, Length: 2}, Limit: 2},
			func(b []byte, i engine.ObjectInfo, err error) { done(result{b, i, err}) })
	})
	if got.err != nil || string(got.body) != "89" || got.info.Size != 10 || got.info.ETag == "" {
		t.Fatalf("ranged get: %q %+v %v", got.body, got.info, got.err)
	}
}

// NewS3ClientFromEnv must reach the endpoint named by AWS_ENDPOINT_URL_S3
// — which the SDK resolves itself — in preference to AWS_ENDPOINT_URL.
func TestNewS3ClientFromEnvHonoursEndpointURLS3(t *testing.T) {
	srv := newFakeS3(t)
	none := filepath.Join(t.TempDir(), "absent")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_S3":                 srv.URL,
		"AWS_ENDPOINT_URL":                    "http://127.0.0.1:1", // must lose
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "",
		"AWS_REGION":                          "us-east-1",
		"AWS_ACCESS_KEY_ID":                   "AKIDSKIPPRDTEST",
		"AWS_SECRET_ACCESS_KEY":               "skipprd-test-secret",
		"AWS_SESSION_TOKEN":                   "",
		"AWS_PROFILE":                         "",
		"AWS_CONFIG_FILE":                     none,
		"AWS_SHARED_CREDENTIALS_FILE":         none,
		"AWS_EC2_METADATA_DISABLED":           "true",
	} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := NewS3ClientFromEnv(ctx, S3ClientOptions{PathStyle: true, ChecksumWhenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	l := startLoop(t)
	store := NewS3Store(l, client, testBucket, S3Options{RequestTimeout: 5 * time.Second})
	t.Cleanup(store.Close)
	if err := store.CheckBucket(ctx); err != nil {
		t.Fatalf("check bucket through the env-configured client: %v", err)
	}
	body := bytes.Repeat([]byte("skipprd "), 1000)
	put(t, l, store, "env/obj", body)
	type result struct {
		body []byte
		err  error
	}
	got, _ := Call(l, func(done func(result)) {
		store.GetObject(engine.GetObjectInput{Key: "env/obj", Limit: 1 << 20},
			func(b []byte, _ engine.ObjectInfo, err error) { done(result{b, err}) })
	})
	// Byte equality also shows that no checksum framing was stored.
	if got.err != nil || !bytes.Equal(got.body, body) {
		t.Fatalf("round trip through the env-configured client: %d bytes, %v", len(got.body), got.err)
	}
}
