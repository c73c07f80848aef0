# mergegate — the two commands a newcomer needs are `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build run test race vet fmt bench load fuzz fuzz-short ci

build: ## build ./bin/mergegate
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/mergegate ./cmd/mergegate

run: build ## run mergegate with the embedded SQLite default (mergegate.db here)
	./bin/mergegate serve --log-format console

test: ## the whole suite, with the race detector
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .

bench: ## benchmarks (figures in the README)
	$(GO) test -run '^$$' -bench . -benchmem ./...

load: ## build ./bin/mergegate-load, the load generator (not part of ./bin/mergegate; see docs/performance.md)
	$(GO) build -trimpath -o bin/mergegate-load ./cmd/mergegate-load

fuzz: ## every fuzz target for FUZZTIME (default 30s)
	FUZZTIME=$(or $(FUZZTIME),30s) ./scripts/fuzz-short

fuzz-short: ## every fuzz target for 5 s (CI)
	./scripts/fuzz-short
