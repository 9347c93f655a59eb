package objects

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// kit is a store under test and a way to put objects in it.
type kit struct {
	store Store
	put   func(t *testing.T, key string, body []byte)
}

// dirKit is a DirStore over a temporary directory.
func dirKit(t *testing.T) kit {
	dir := t.TempDir()
	return kit{
		store: NewDirStore(dir),
		put:   func(t *testing.T, key string, body []byte) { writeFile(t, dir, key, body) },
	}
}

const testBucket = "drop-bucket"

// s3Kit is an S3 store under the prefix "in" of a gofakes3 bucket (its
// memory backend, over HTTP), read by the real SDK client, listing two
// keys a page so that listings span pages. An object beside the prefix
// ("in2/…") must never be listed.
func s3Kit(t *testing.T) kit {
	backend := s3mem.New()
	if err := backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(srv.URL),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDOBJECTSTEST", "objects-test-secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	put := func(t *testing.T, key string, body []byte) {
		t.Helper()
		_, err := client.PutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String(testBucket), Key: aws.String(key), Body: bytes.NewReader(body),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(t, "in2/beside.jsonl", []byte("not json\n"))
	store := NewS3Store(client, testBucket, "in")
	store.(*s3Store).pageSize = 2
	return kit{
		store: store,
		put:   func(t *testing.T, key string, body []byte) { put(t, "in/"+key, body) },
	}
}
