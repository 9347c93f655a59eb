// Package storetest is a conformance suite for engine.ObjectStore. The
// production S3 adapter (over gofakes3, through the real aws-sdk-go-v2
// client) and the simulator's object-store model both run it, so the model
// the simulator tests the engine against behaves like the real thing in
// every way the engine relies on. Test support only.
package storetest
