// Package golden compares encoded bytes against golden files kept in a
// package's testdata, or rewrites them on request (-update). Test
// support only.
package golden
