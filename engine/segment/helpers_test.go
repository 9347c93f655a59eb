package segment

import "crypto/sha256"

// withSum appends the SHA-256 of body, as markers and bitmaps end.
func withSum(body []byte) []byte {
	sum := sha256.Sum256(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

// resum replaces the trailing SHA-256 of an object so that a test can
// present a structurally bad object whose checksum is right.
func resum(b []byte) []byte { return withSum(b[:len(b)-sumBytes]) }
