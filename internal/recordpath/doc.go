// Package recordpath measures one record's path through the daemon for
// scripts/record-path. Built without the recordpath tag, Spine does
// nothing and costs nothing (an empty function, inlined away).
//
// With the tag, Spine records the functions of this module on the
// calling goroutine's stack — where control is when a record reaches a
// port (an object PUT or GET, a disk write or sync), when a port
// answers, and when the engine answers the submitter. The union of those
// stacks between Clear and Write is the record's spine: the functions
// control passes through on its way from the HTTP request to the ACK,
// without the leaves that returned before (a decoder's helpers, a
// check), which the coverage count in the same script includes.
package recordpath
