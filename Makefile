# bhw-run — build, test, lint, bench. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CLAUDE_VERSION := 2.1.332
CODEX_VERSION  := 0.171.0
TOOLS      := $(CURDIR)/.tools
CLAUDE_BIN := $(TOOLS)/node_modules/@anthropic-ai/claude-code-linux-x64/claude
CODEX_BIN  := $(TOOLS)/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
STAMP      := $(TOOLS)/.installed-claude-$(CLAUDE_VERSION)-codex-$(CODEX_VERSION)
GO_TEST_ENV := BHW_CLAUDE_BIN=$(CLAUDE_BIN) BHW_CODEX_BIN=$(CODEX_BIN)

.PHONY: help build install test e2e lint bench fuzz tools demo clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

# A static binary (no cgo): one file that runs anywhere, and it starts a
# millisecond faster than the dynamically linked one.
export CGO_ENABLED := 0

build: ## build bin/bhw-run
	go build -o bin/bhw-run .

install: ## install bhw-run into $(go env GOPATH)/bin
	go install .

tools: $(STAMP) ## install the pinned agent CLIs from npm into .tools/ (for the end-to-end tests)

# The CLIs ship their native binaries inside registry packages; nothing is
# downloaded from anywhere else. A failed install fails the tests.
$(STAMP):
	rm -rf $(TOOLS) && mkdir -p $(TOOLS)
	npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_VERSION) @openai/codex@$(CODEX_VERSION)
	test -x $(CLAUDE_BIN) || { echo "the Claude Code native binary is missing after npm install"; exit 1; }
	test -x $(CODEX_BIN) || { echo "the Codex native binary is missing after npm install"; exit 1; }
	$(CLAUDE_BIN) --version | grep -q '^$(CLAUDE_VERSION) '
	$(CODEX_BIN) --version | grep -q '$(CODEX_VERSION)'
	touch $@

test: tools ## run every test, the end-to-end ones with the real CLIs included
	$(GO_TEST_ENV) go test -count=1 -timeout 80m ./...

e2e: tools ## run only the end-to-end tests against the real CLIs
	$(GO_TEST_ENV) go test -count=1 -timeout 40m -run 'E2E' ./...

lint: ## go vet, gofmt, staticcheck (pinned in go.mod's tool block)
	go vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go tool staticcheck ./...

bench: tools ## benchmarks: idle run vs two curls, agent overhead, relay rate (medians), outbox publishing, a pass over 1,000 threads
	$(GO_TEST_ENV) go test -run '^$$' -bench 'IdleRun' -benchtime 20x -count 1 .
	$(GO_TEST_ENV) go test -run '^$$' -bench 'TurnOverhead' -benchtime 10x -count 1 .
	$(GO_TEST_ENV) go test -run '^$$' -bench 'RelayItems' -benchtime 3x -count 1 .
	go test -run '^$$' -bench . -count 1 ./blobhub/... ./policy/... ./envelope/...
	go test -run '^$$' -bench 'Publish' -benchmem -benchtime 3x -count 1 ./run/
	go test -run '^$$' -bench 'FanOut' -benchtime 1x -count 1 -timeout 30m .

fuzz: ## run each fuzz test for 20 s
	@for pkg in $$(go list ./...); do \
	  for f in $$(go test -list 'Fuzz.*' $$pkg | grep ^Fuzz); do \
	    go test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s $$pkg || exit 1; \
	  done; \
	done

demo: tools build ## the whole flow offline with the pinned CLI and a scripted model
	$(GO_TEST_ENV) go run ./scripts/demo

clean: ## remove build outputs and installed tools
	rm -rf bin $(TOOLS)
