package httpsrc

import (
	"fmt"
	"unicode/utf8"
)

// nameBytesMax is the longest field name, in bytes: names become column
// names in every sink, where a few hundred bytes is already generous.
const nameBytesMax = 256

// nameProblem returns what makes name unfit to name a field, or "".
func nameProblem(name string) string {
	switch {
	case name == "":
		return "a field name is empty"
	case len(name) > nameBytesMax:
		return fmt.Sprintf("field name %s is %d bytes long; at most %d", quote(name), len(name), nameBytesMax)
	case !utf8.ValidString(name):
		return fmt.Sprintf("field name %s is not valid UTF-8", quote(name))
	}
	return ""
}
