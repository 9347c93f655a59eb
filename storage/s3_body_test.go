package storage

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine"
)

func TestReadLimited(t *testing.T) {
	for _, c := range []struct {
		name            string
		body            string
		declared, limit int64
		want            string
		wantErr         error
	}{
		{"declared, under the limit", "abc", 3, 10, "abc", nil},
		{"declared, exactly the limit", "abcd", 4, 4, "abcd", nil},
		{"declared over the limit", "abcde", 5, 4, "", engine.ErrTooLarge},
		{"undeclared, exactly the limit", "abcd", -1, 4, "abcd", nil},
		{"undeclared, one over the limit", "abcde", -1, 4, "", engine.ErrTooLarge},
		{"empty", "", 0, 1, "", nil},
		{"shorter than declared", "ab", 3, 10, "", io.ErrUnexpectedEOF},
		{"longer than declared, within limit", "abcd", 3, 10, "", io.ErrUnexpectedEOF},
		{"longer than declared, past limit", "abcdef", 3, 4, "", engine.ErrTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readLimited(strings.NewReader(c.body), c.declared, c.limit)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			if err == nil && string(got) != c.want {
				t.Fatalf("body %q, want %q", got, c.want)
			}
		})
	}
}

func TestTotalSize(t *testing.T) {
	for _, c := range []struct {
		contentRange string
		want         int64
	}{
		{"bytes 3-6/10", 10},
		{"bytes 0-0/1", 1},
		{"bytes 3-6/*", 99},
		{"", 99},
		{"garbage", 99},
	} {
		if got := totalSize(c.contentRange, 99); got != c.want {
			t.Errorf("totalSize(%q) = %d, want %d", c.contentRange, got, c.want)
		}
	}
}

func TestBorrowedBodyIsUnreadableAfterRevoke(t *testing.T) {
	b := newBorrowedBody([]byte("0123456789"))
	p := make([]byte, 4)
	if n, err := b.Read(p); n != 4 || err != nil {
		t.Fatalf("read before revoke: %d %v", n, err)
	}
	if at, err := b.Seek(0, io.SeekStart); at != 0 || err != nil {
		t.Fatalf("seek before revoke: %d %v", at, err)
	}
	b.revoke()
	if n, err := b.Read(p); n != 0 || !errors.Is(err, errBodyRevoked) {
		t.Fatalf("read after revoke: %d %v", n, err)
	}
	if _, err := b.Seek(0, io.SeekStart); !errors.Is(err, errBodyRevoked) {
		t.Fatalf("seek after revoke: %v", err)
	}
}
