// Package logbuf is a buffer that several goroutines may write to at
// once — what tests capture a daemon's, a source's or a disk's log in.
package logbuf
