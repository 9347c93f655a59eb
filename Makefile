# skipprd — see README.md. Two set-up commands: `make run`, `make test`.
GO         ?= go
FUZZTIME   ?= 30s
BENCHCOUNT ?= 5
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Fuzz targets, as package:Target.
FUZZ_TARGETS = \
	./engine/segment:FuzzOpenBody \
	./engine/segment:FuzzReadIndex \
	./engine/segment:FuzzDecodeMarker \
	./engine/segment:FuzzDecodeBitmap \
	./engine/segment:FuzzDecodeSidecar \
	./engine/segment:FuzzDecodeOffsets \
	./engine/segment:FuzzDecodeCheckpoint \
	./engine/segment:FuzzDecodeKeyManifest \
	./engine/wal:FuzzScan \
	./engine/wal:FuzzDecodeRecord

.PHONY: run test bench fuzz lint mutants pg-setup soak

# The daemon with no configuration: local-disk WAL, segment store and
# Iceberg tables (SQLite catalog) under ./data/lake, the generator source,
# a progress line every second.
# Ctrl-C stops it gracefully. Environment variables: README.md.
run:
	$(GO) build -buildvcs=auto -o bin/skipprd ./cmd/skipprd
	./bin/skipprd

# Make the local PostgreSQL server ready for the Postgres tests
# (wal_level=logical for the CDC source; restarts it if that changed).
# Without it those tests skip, loudly; under CI=true they fail.
pg-setup:
	./scripts/pg-setup

# Unit, property and golden tests, fuzz seed corpora, the engine lint.
# pgcheck says first whether the Postgres tests will run or skip. The
# daemon's tests mostly wait (for fences, flushes, kills), so six run at
# once (-parallel 6; go test's default is one per core).
test:
	$(GO) vet ./...
	@$(GO) run ./internal/pgtest/pgcheck
	$(GO) test -timeout 25m -parallel 6 ./...

# The full-scale runs make test keeps reduced: the key-store day at the
# production rate (make test runs it at a tenth of the keys), and the
# swarm sweep's worlds at 100,000 steps (make test: 60,000), and a
# prefix of 100,000 objects (make test: 20,000).
soak:
	SKIPPR_KEY_DAY_RATE=1000 $(GO) test -timeout 60m -count=1 -run '^TestKeyStoreDay$$' -v ./engine
	SKIPPR_SWEEP_ITERS=100000 $(GO) test -timeout 60m -count=1 -run '^TestSweep$$' -v ./cmd/simulate
	SKIPPR_SCALE_OBJECTS=100000 $(GO) test -timeout 60m -count=1 -run '^TestDaemonObjectsAtScale$$' -v ./cmd/skipprd

# Benchmarks with their baselines in the same run, then the ratios.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./... | tee bench.out
	@echo; echo "ratios (mean ns/op over $(BENCHCOUNT) runs):"
	@awk -f scripts/bench-ratios.awk bench.out

# Each fuzz target for FUZZTIME (override: make fuzz FUZZTIME=5m).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME); \
	done

# Mutation self-test of the simulator's oracles: each one-line bug in
# internal/mutants/mutants.txt, applied to a scratch copy of the tree, must
# fail a bounded simulate sweep. Not part of test (about 20 minutes on
# two cores). MUTANTS_FLAGS, e.g. "-only ack-after-body -seeds 100".
mutants:
	$(GO) build -o bin/mutants ./cmd/mutants
	./bin/mutants -report mutants.out $(MUTANTS_FLAGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
