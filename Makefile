# mergegate — the two commands a newcomer needs are `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build run test race vet fmt bench load fuzz fuzz-short ci release

build: ## build ./bin/mergegate, static (SQLite is pure Go: no C compiler, no libc)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/mergegate ./cmd/mergegate

run: build ## run mergegate with the embedded SQLite default (mergegate.db here)
	./bin/mergegate serve --log-format console

# The race detector needs cgo and a C compiler; without them `make test`
# runs the suite without it (and says so) rather than failing to build.
RACE := $(shell [ "$$($(GO) env CGO_ENABLED)" = 1 ] && set -- $$($(GO) env CC) && command -v "$$1" >/dev/null 2>&1 && echo -race)

# go test -json through internal/testsummary: what plain go test prints,
# then each skipped test with its reason (how to run it), then
# "N passed, N failed".
test: ## the whole suite, with the race detector where cgo and a C compiler are present
	@[ -n "$(RACE)" ] || echo "make test: no cgo or no C compiler ($$($(GO) env CC)): running without the race detector"
	$(GO) test $(RACE) -count=1 -json ./... | $(GO) run ./internal/testsummary

race: ## the whole suite with the race detector (needs cgo and a C compiler)
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .

bench: ## benchmarks (figures in docs/performance.md)
	$(GO) test -run '^$$' -bench . -benchmem ./...

load: ## build ./bin/mergegate-load, the load generator (not part of ./bin/mergegate; see docs/performance.md)
	$(GO) build -trimpath -o bin/mergegate-load ./cmd/mergegate-load

fuzz: ## every fuzz target for FUZZTIME (default 30s)
	FUZZTIME=$(or $(FUZZTIME),30s) ./scripts/fuzz-short

fuzz-short: ## every fuzz target for 5 s (CI)
	./scripts/fuzz-short

ci: ## what CI runs (.ci/run): gofmt, vet, fuzz-short, the suite beside a PostgreSQL server, the release build
	./.ci/run

release: ## static binaries for linux and darwin, amd64 and arm64, with SHA256SUMS, into OUT (default dist/)
	VERSION=$(VERSION) COMMIT=$(COMMIT) ./scripts/release $(or $(OUT),dist)
