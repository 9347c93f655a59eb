// Package diskstore is an engine.ObjectStore kept in a directory of an
// engine.Disk. In local-disk WAL mode without an object store, committed
// segments (.seg, .seg.commit, bitmaps), the writer object and checkpoints
// live in a segment directory under DATA_DIR, and persist, recovery,
// reclaim and the sweeper run unchanged against it: over storage.OSDisk in
// production and over sim.Disk, with its crash model, in the simulator.
// Like every package under engine/ it is deterministic and single-threaded
// (engine/lint_test.go): it only issues Disk calls and continues in their
// callbacks.
//
// # What it owns
//
// Everything under its root directory, and nothing else:
//
//	<root>/
//	├── objects/                      one file per object, a directory per "/"
//	│   ├── pipe.d/                   key prefix "pipe/"
//	│   │   ├── _writer.o             key "pipe/_writer"
//	│   │   ├── p_year=2026.d/        key prefix "pipe/p_year=2026/"
//	│   │   │   └── …/000-001.seg.o   key "pipe/p_year=2026/…/000-001.seg"
//	│   │   └── .3f9c…e1.tmp          a write in progress (never listed)
//	│   └── pipe.o                    key "pipe" (a key may also be a prefix)
//	└── uploads/
//	    └── 5a0d…77/                  upload id: 16 hex digits from Rand
//	        ├── meta                  key and initiation time; the upload
//	        │                         exists iff this file does
//	        ├── part-00001            part 1 (object file format)
//	        └── part-00002
//
// A key's elements are directories with the suffix ".d" and its last
// element a file with the suffix ".o". The suffixes keep the two kinds of
// names apart — S3 lets "a" and "a/b" both be keys, a directory cannot
// also be a file — and tell a listing which names are directories without
// a stat call, which the Disk port does not have. Temp files are named
// "." + 16 hex digits + ".tmp". format.go has the file formats: every
// object file starts with a header (magic, version, last-modified time,
// body length, body digest, the key, a checksum of the header), so HEAD
// and LIST report Size, ETag and LastModified from it; the ETag is the
// quoted lowercase hex XXH3-128 digest of the body.
//
// Valid keys (checkKey): 1 to 1024 bytes of UTF-8 without NUL; elements
// non-empty (no leading, trailing or doubled "/"), not "." or "..", and
// at most 250 bytes (file names stay under 255). Another key fails with
// ErrInvalidKey. The directory must be on a case-sensitive filesystem:
// keys that differ only in case would share a file (the key in the header
// then makes reads of the other fail as corrupt rather than answer
// wrongly).
//
// # Invariants
//
// Atomicity. A file under an object (or meta, or part) name was written
// whole under a temp name in the same directory and renamed there, so a
// crash at any moment leaves the old object or the new one, never a torn
// one. Temp files are invisible: listings skip them, and remove those no
// write of this store is still using (leftovers of a failed write or of a
// process that died); a leftover in a directory that is never listed
// stays until it is.
//
// Durability. When PutObject, CompleteMultipartUpload or DeleteObject
// reports success, its effect survives a crash: the temp file was synced
// before its rename and the directory synced after it (after the Remove,
// for a delete); a directory made for a key was made with MkdirAll and
// every level synced into its parent, up to the disk root, before
// anything was put in it. An upload exists once its meta file is durable
// (written the same way) and ends once its removal is: Complete removes
// it only after the object is durable, so a failed or interrupted
// Complete can be retried. Parts are not synced: a crash that could lose
// them also kills the process that uploaded them, and Complete checks
// every part it copies (its header, and its body against its digest)
// before the copy, which is synced, becomes the object.
//
// Reads answer from durable state. Requests on one key are serialized
// (below), so a GET or HEAD never sees a write that has not completed;
// and when a directory's entry change could not be synced (the write was
// reported ambiguous), a later read of a key in that directory syncs it
// first, and fails rather than answer if it cannot. Listings take no lock
// and show the live directory tree, writes in flight included.
//
// Ordering. Requests on one key go through a FIFO reader/writer lock
// (lock.go): GET and HEAD share it, PUT, DELETE and COMPLETE hold it
// alone, in call order. A conditional PUT checks and renames under it, so
// no other request on the key comes between. Uploads have such a lock
// too: parts share it, COMPLETE and ABORT hold it alone. Atomicity of
// conditions holds against requests through the same Store: one Store per
// root at a time.
//
// Listings are immediately consistent and ordered by the bytes of the
// whole key (list.go); pages hold PageSize objects or uploads, and a page
// token is the last key of its page.
//
// Corruption. An object header or meta file that fails its checks —
// magic, version, bounds, checksum, the key it names, the file's size, a
// whole body against its digest — is an error wrapping engine.ErrCorrupt,
// never taken for a missing object. A part that fails them makes Complete
// fail with ErrInvalidPart instead: parts are not synced, so a torn part
// after a crash is expected, and the upload cannot complete either way. Every length read from disk is
// bounded before anything is sized from it (KeyMax, BodyMax, and the
// file's size).
//
// Completions. Every callback runs later, from a Disk callback, never
// inside the call; a request refused without I/O (an invalid key) still
// completes through a cheap disk call (a ReadDir of the root whose answer
// is ignored).
//
// # Errors
//
// A request fails definitely (no effect) when a disk call fails before
// the rename (or the remove) that would make its effect visible: the
// temp file is removed and the error does not wrap engine.ErrAmbiguous.
// An error from that Rename or Remove itself, or from the SyncDir after
// it, wraps engine.ErrAmbiguous: it may or may not have taken effect, or
// may not survive a crash. The answers the contract names are the
// engine's sentinels (ErrNotFound, ErrPreconditionFailed, ErrNoSuchUpload,
// ErrTooLarge, ErrCorrupt); ErrInvalidKey, ErrInvalidPart and
// ErrInvalidRange are the store's own. A disk's errors are reported in
// the message but not wrapped, so a disk's ErrNotFound is never mistaken
// for the store's.
package diskstore
