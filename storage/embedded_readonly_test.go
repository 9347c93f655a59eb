package storage

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A read-only embedded store serves what the file holds and refuses every
// write, leaving the file as it was; it cannot open a file another store
// holds, nor create a bucket the file lacks.
func TestEmbeddedS3ReadOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "wal-s3.bolt")
	rw := startEmbedded(t, path)
	put := func(e *EmbeddedS3, key string) error {
		_, err := e.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.Bucket()), Key: aws.String(key), Body: strings.NewReader("body")})
		return err
	}
	if err := put(rw, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := StartEmbeddedS3ReadOnly(path, embeddedTestBucket, nil); !errors.Is(err, ErrEmbeddedLocked) {
		t.Fatalf("read-only open of a file a store holds: %v, want ErrEmbeddedLocked", err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := StartEmbeddedS3ReadOnly(path, embeddedTestBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ro.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(ro.Bucket()), Key: aws.String("a")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(body) != "body" {
		t.Fatalf("read %q, want %q", body, "body")
	}
	if err := put(ro, "b"); err == nil {
		t.Fatal("a PUT to the read-only store succeeded")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the read-only store changed its file: %d bytes at %v, was %d at %v", after.Size(), after.ModTime(), before.Size(), before.ModTime())
	}
	if _, err := StartEmbeddedS3ReadOnly(path, "other", nil); !errors.Is(err, ErrEmbeddedNoBucket) {
		t.Fatalf("read-only open of a bucket the file lacks: %v, want ErrEmbeddedNoBucket", err)
	}
}
