package postgrescdc

import (
	"encoding/binary"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// Identity of a row: its key columns' values in column order, each as
// its text form behind a big-endian u16 length:
//
//	key column 1            key column 2
//	+--------+-----------+  +--------+-----------+
//	| u16 n1 | n1 bytes  |  | u16 n2 | n2 bytes  |  …
//	+--------+-----------+  +--------+-----------+
//
// The snapshot and the stream both read text forms with the same
// session settings (session.go, sessionParams), so one row has one
// identity whichever produced it. The whole is at most
// segment.SidecarIdentityBytesMax bytes.

// appendIdentity appends the identity of values (the key columns' text
// forms, in column order) to dst. A NULL key value or an identity over
// the limit is an error of the stream.
func appendIdentity(dst []byte, table tableName, keyNames []string, values [][]byte) ([]byte, error) {
	start := len(dst)
	for i, v := range values {
		if v == nil {
			return dst, streamf("table %s: key column %q is NULL", table, keyNames[i])
		}
		if len(dst)-start+2+len(v) > segment.SidecarIdentityBytesMax {
			return dst, streamf("table %s: the key (%s) is over %d bytes in text form",
				table, fmt.Sprint(keyNames), segment.SidecarIdentityBytesMax)
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(v)))
		dst = append(dst, v...)
	}
	return dst, nil
}
