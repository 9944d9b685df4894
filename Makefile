# bhw-run — build, test, lint, bench. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CLAUDE_VERSION   := 2.1.332
CODEX_VERSION    := 0.171.0
GEMINI_VERSION   := 0.61.0
QWEN_VERSION     := 0.24.4
OPENCODE_VERSION := 1.18.33
COPILOT_VERSION  := 1.0.102
TOOLS      := $(CURDIR)/.tools
NPM_MODS   := $(TOOLS)/node_modules
CLAUDE_BIN := $(NPM_MODS)/@anthropic-ai/claude-code-linux-x64/claude
CODEX_BIN  := $(NPM_MODS)/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
# Gemini CLI and Qwen Code are node programs (their package "bin"; the
# "#!/usr/bin/env node" line needs node on PATH). OpenCode and Copilot ship
# native binaries in per-platform packages: those are spawned directly, not
# the npm launcher scripts in front of them.
GEMINI_BIN   := $(NPM_MODS)/@google/gemini-cli/bundle/gemini.js
QWEN_BIN     := $(NPM_MODS)/@qwen-code/qwen-code/cli-entry.js
OPENCODE_BIN := $(NPM_MODS)/opencode-linux-x64/bin/opencode
COPILOT_BIN  := $(NPM_MODS)/@github/copilot-linux-x64/copilot
# Copilot unpacks a 235 MB runtime into $XDG_CACHE_HOME/copilot on its first
# start; its version check fills COPILOT_CACHE once, and the tests share it.
# The checks run with a home inside .tools/, so none of the CLIs writes into
# the user's own ~/.cache, ~/.config or ~/.gemini.
COPILOT_CACHE := $(TOOLS)/cache
TOOL_XDG   := XDG_CONFIG_HOME=$(TOOLS)/home/.config XDG_DATA_HOME=$(TOOLS)/home/.local/share \
	XDG_STATE_HOME=$(TOOLS)/home/.local/state XDG_CACHE_HOME=$(COPILOT_CACHE)
TOOL_ENV   := env -i PATH="$$PATH" LANG=C.UTF-8 HOME=$(TOOLS)/home $(TOOL_XDG)
AGENT_TYPES := claude_code codex gemini qwen_code opencode copilot
# The peer: the real Python blobhub-worker, BlobHub SDK and BlobHub CLI from
# PyPI, in a venv under .tools/peer, for the conformance tests (peer/). The
# worker and the CLI declare Python >= 3.12; PEER_BASE_PYTHON is the first
# interpreter found that is at least that (pyenv's versions are looked in
# too, since its shims answer for versions that are not selected).
# peer/requirements.txt pins every package they pull in.
PEER_WORKER_VERSION := 0.11.0
PEER_SDK_VERSION    := 0.3.0
PEER_CLI_VERSION    := 0.6.0
PEER        := $(TOOLS)/peer
PEER_PYTHON := $(PEER)/bin/python
PEER_STAMP  := $(PEER)/.installed-worker-$(PEER_WORKER_VERSION)-sdk-$(PEER_SDK_VERSION)-cli-$(PEER_CLI_VERSION)
PEER_BASE_PYTHON ?= $(shell for p in python3.13 python3.12 $$(pyenv root 2>/dev/null)/versions/3.1[2-9]*/bin/python3 python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; done)
GO_TEST_ENV := BHW_CLAUDE_BIN=$(CLAUDE_BIN) BHW_CODEX_BIN=$(CODEX_BIN) \
	BHW_GEMINI_BIN=$(GEMINI_BIN) BHW_QWEN_BIN=$(QWEN_BIN) \
	BHW_OPENCODE_BIN=$(OPENCODE_BIN) BHW_COPILOT_BIN=$(COPILOT_BIN) BHW_COPILOT_CACHE=$(COPILOT_CACHE) \
	BHW_PEER_PYTHON=$(PEER_PYTHON) BHW_SYSDEPS=1

# make install puts bhw-run, its man page and its shell completions under
# PREFIX (DESTDIR in front, for packaging). /usr/local/bin is on the PATH of
# the cron and systemd recipes in contrib/; with another PREFIX, add its bin
# to theirs.
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  := $(DESTDIR)$(PREFIX)/bin
MANDIR  := $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR  := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d

# The Debian packages the tests drive beyond Go and npm: tmux (the terminal
# tests), zsh and fish (the completion scripts), groff and man-db (the man
# page), logrotate (the logrotate recipe) and systemd (systemd-analyze
# verifies the unit and timer). SYSDEP_CMDS are the commands they bring, in
# the same order (internal/sysdeps finds them for the tests); logrotate
# lives in /usr/sbin, which the tests look in too.
SYSDEPS     := tmux zsh fish groff-base man-db logrotate systemd
SYSDEP_CMDS := tmux zsh fish groff man logrotate systemd-analyze

.PHONY: help build man completions install test test-under-load cross e2e lint bench fuzz tools $(addprefix tools-,$(AGENT_TYPES)) peer sysdeps demo model live-check clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'
	@echo "  make tools-TYPE  install one pinned agent CLI into .tools/ (TYPE: $(AGENT_TYPES))"

# A static binary (no cgo): one file that runs anywhere, and it starts a
# millisecond faster than the dynamically linked one.
export CGO_ENABLED := 0

# urfave/cli without its markdown/man generator (bhw-run writes its own man
# page): the generator's markdown parser initialises itself in every process,
# about half a millisecond of CPU on each run a cron tick makes. Exported so
# every go command here, and the one the tests run to build bhw-run, agree.
# realcli brings in the tests that drive the real agent CLIs and the Python
# peer of .tools/ (e2e/, claude/, codex/, acp/, acp/acptest, peer/): every
# target sets it, so make test runs everything, while a bare `go test ./...`
# runs the hermetic, fake-backed rest (docs/testing.md).
# A GOFLAGS in the environment is kept, its -tags joined with these, so
#   GOFLAGS='-tags=cpuprofile -ldflags=-X=github.com/blobhub/bhw-run/cli.cpuProfileDir=/tmp/prof' make bench
# profiles every bhw-run the benchmarks start (cli/cpuprofile.go).
comma    := ,
env_tags := $(patsubst -tags=%,%,$(filter -tags=%,$(GOFLAGS)))
export GOFLAGS := $(strip $(filter-out -tags=%,$(GOFLAGS)) -tags=$(if $(env_tags),$(env_tags)$(comma))realcli$(comma)urfave_cli_no_docs)

# The version `bhw-run version` prints: the nearest tag, the commit, and
# -dirty for local changes. Outside a git checkout it is empty and the
# binary reads its build info instead (a module version, or "dev").
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION)

build: ## build bin/bhw-run
	@test -e bin/bhw-run || echo "building bin/bhw-run (the first build compiles every module: up to a minute)"
	@go build -ldflags "$(LDFLAGS)" -o bin/bhw-run .

man: build ## write the man page bin/bhw-run.1, made from the command definitions
	bin/bhw-run man > bin/bhw-run.1

completions: build ## write the bash, zsh and fish completion scripts into bin/
	bin/bhw-run completion bash > bin/bhw-run.bash
	bin/bhw-run completion zsh > bin/_bhw-run
	bin/bhw-run completion fish > bin/bhw-run.fish

install: man completions ## install bhw-run, its man page and shell completions under PREFIX (default /usr/local)
	install -d $(BINDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	install -m 0755 bin/bhw-run $(BINDIR)/bhw-run
	install -m 0644 bin/bhw-run.1 $(MANDIR)/bhw-run.1
	install -m 0644 bin/bhw-run.bash $(BASHDIR)/bhw-run
	install -m 0644 bin/_bhw-run $(ZSHDIR)/_bhw-run
	install -m 0644 bin/bhw-run.fish $(FISHDIR)/bhw-run.fish
	@echo "installed $(BINDIR)/bhw-run"
	@[ -n "$(DESTDIR)" ] || case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) \
		echo "$(PREFIX)/bin is not on your PATH: add it, e.g. echo 'export PATH=\"$(PREFIX)/bin:\$$PATH\"' >> ~/.bashrc, and to the PATH= of a cron or systemd recipe";; esac

tools: $(addprefix tools-,$(AGENT_TYPES)) peer ## install the pinned agent CLIs from npm and the Python peer from PyPI into .tools/ (for the end-to-end and conformance tests)

peer: $(PEER_STAMP) ## install the pinned blobhub-worker, BlobHub SDK and CLI from PyPI into .tools/peer (for the conformance tests)

# PyPI only: pip's own default index, with any find-links of the machine's
# pip configuration switched off. --no-deps with the full pinned list makes
# the venv exactly peer/requirements.txt.
$(PEER_STAMP): peer/requirements.txt
	@test -n "$(PEER_BASE_PYTHON)" || { echo "the peer needs Python >= 3.12 (blobhub-worker and blobhub-cli require it); install one, or pass PEER_BASE_PYTHON=/path/to/python3.12"; exit 1; }
	rm -rf $(PEER) && $(PEER_BASE_PYTHON) -m venv $(PEER)
	PIP_FIND_LINKS= $(PEER_PYTHON) -m pip install --quiet --no-input --disable-pip-version-check \
		--no-deps -r peer/requirements.txt
	$(PEER_PYTHON) -m pip check
	$(PEER_PYTHON) -c 'import importlib.metadata as m; \
		want = {"blobhub-worker": "$(PEER_WORKER_VERSION)", "blobhub": "$(PEER_SDK_VERSION)", "blobhub-cli": "$(PEER_CLI_VERSION)"}; \
		got = {k: m.version(k) for k in want}; \
		assert got == want, f"the peer venv holds {got}, not {want}"'
	touch $@

# The CLIs ship their native binaries inside registry packages; nothing is
# downloaded from anywhere else. A failed install fails the tests.
# One target per agent type, so the demo installs only the CLI it drives
# (make demo AGENT=gemini: tools-gemini); make tools and make test install
# all six. Each stamp names its version: a bump reinstalls that CLI. A CLI
# already at its pinned version (an older checkout's install) is kept.
# The version checks run in the tools' own home (TOOL_ENV): Codex, for one,
# writes ~/.codex/tmp, and OpenCode's postinstall makes its XDG dirs.
# $(call agent_tool,TYPE,VERSION,PACKAGE,BIN,GREP -E PATTERN OF --version,DOWNLOAD)
define agent_tool
tools-$(1): $(TOOLS)/.installed-$(1)-$(2) ## install the pinned $(3)@$(2) into .tools/ ($(6) download)
$(TOOLS)/.installed-$(1)-$(2):
	@mkdir -p $$(TOOLS)/home
	@$$(TOOL_ENV) $(4) --version 2>/dev/null | grep -qE '$(5)' || { \
		echo "installing $(3)@$(2) into .tools/ ($(6) download)"; \
		$$(TOOL_XDG) npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error $(3)@$(2); }
	@test -e $(4) || { echo "$(4) is missing after npm install $(3)@$(2)"; exit 1; }
	@$$(TOOL_ENV) $(4) --version | grep -qE '$(5)' \
		|| { echo "$(4) is not version $(2) after npm install $(3)@$(2)"; exit 1; }
	@touch $$@
endef
$(eval $(call agent_tool,claude_code,$(CLAUDE_VERSION),@anthropic-ai/claude-code,$(CLAUDE_BIN),^$(CLAUDE_VERSION) ,186 MB))
$(eval $(call agent_tool,codex,$(CODEX_VERSION),@openai/codex,$(CODEX_BIN),$(CODEX_VERSION),172 MB))
$(eval $(call agent_tool,gemini,$(GEMINI_VERSION),@google/gemini-cli,$(GEMINI_BIN),^$(GEMINI_VERSION)$$$$,30 MB))
$(eval $(call agent_tool,qwen_code,$(QWEN_VERSION),@qwen-code/qwen-code,$(QWEN_BIN),^$(QWEN_VERSION)$$$$,35 MB))
$(eval $(call agent_tool,opencode,$(OPENCODE_VERSION),opencode-ai,$(OPENCODE_BIN),^$(OPENCODE_VERSION)$$$$,120 MB))
$(eval $(call agent_tool,copilot,$(COPILOT_VERSION),@github/copilot,$(COPILOT_BIN),^GitHub Copilot CLI $(COPILOT_VERSION)\.,130 MB))

# The race detector runs over the packages that drive fakes in-process (it
# needs cgo, so a C compiler). The kill -9 tests are left to the plain pass:
# each runs dozens of activations in subprocesses, where it sees nothing.
RACE_PKGS := ./agent/... ./run/... ./setup/... ./exit/... ./redact/... ./statefile/... ./lock/... ./outbox/... ./blobhub/... ./envelope/... ./policy/...

# Missing packages are installed with apt-get when make runs as root on
# Debian (one apt-get update, then one install of the missing ones only);
# with all present it is a quick no-op. Anywhere else a missing one stops
# the tests with its name.
sysdeps: ## check (as root on Debian: install) tmux, zsh, fish, groff, man, logrotate and systemd-analyze for the tests
	@missing() { local cmds=($(SYSDEP_CMDS)) pkgs=($(SYSDEPS)) m="" i; \
		for i in $${!cmds[@]}; do PATH="$$PATH:/usr/sbin:/sbin" command -v $${cmds[$$i]} >/dev/null || m="$$m $${pkgs[$$i]}"; done; \
		echo "$$m"; }; \
	m=$$(missing); \
	if [ -n "$$m" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$m with apt-get"; \
		log=$$(mktemp); \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$m; } >$$log 2>&1 \
			|| { tail -n 20 $$log; echo "apt-get could not install$$m"; }; \
		rm -f $$log; m=$$(missing); \
	fi; \
	if [ -n "$$m" ]; then echo "the tests need the Debian packages$$m (apt-get install$$m)"; exit 1; fi

# The platforms bhw-run builds for besides this one (docs/macos.md): each
# is built and vetted, its test files included, so a change that breaks a
# Mac fails here. Nothing of them runs here.
CROSS := darwin/arm64 darwin/amd64 linux/arm64 linux/amd64

cross: ## build and go vet (tests included) for darwin/arm64, darwin/amd64, linux/arm64 and linux/amd64
	@for p in $(CROSS); do echo "GOOS=$${p%/*} GOARCH=$${p#*/}"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} go build ./... && GOOS=$${p%/*} GOARCH=$${p#*/} go vet ./... || exit 1; done

test: tools sysdeps cross ## run every test, the end-to-end ones with the real CLIs included, then the race detector over the fake-backed ones
	$(GO_TEST_ENV) go test -count=1 -timeout 80m ./...
	CGO_ENABLED=1 $(GO_TEST_ENV) go test -count=1 -race -timeout 30m -skip '^TestKill9' $(RACE_PKGS)
	CGO_ENABLED=1 $(GO_TEST_ENV) go test -count=1 -race -timeout 30m -run 'Fake|Conformance' ./claude/... ./codex/... ./acp/

# test-under-load runs make test UNDER_LOAD_RUNS times in a row while one
# busy loop per core keeps the machine busy, as a laptop doing other work
# or a shared CI runner is (docs/testing.md). Each loop is bounded by
# UNDER_LOAD_BOUND and stopped as soon as the runs end, however they end.
UNDER_LOAD_RUNS  ?= 1
UNDER_LOAD_BOUND ?= 4h

test-under-load: ## make test while a busy loop per core keeps the machine busy (UNDER_LOAD_RUNS times; not part of make test)
	@hogs=; for i in $$(seq $$(nproc)); do \
	  timeout --kill-after=5s $(UNDER_LOAD_BOUND) sh -c 'while :; do :; done' & hogs="$$hogs $$!"; done; \
	trap 'kill $$hogs 2>/dev/null' EXIT INT TERM; \
	echo "test-under-load: $$(nproc) busy loops (pids$$hogs), $(UNDER_LOAD_RUNS) run(s) of make test"; \
	for r in $$(seq $(UNDER_LOAD_RUNS)); do \
	  start=$$(date +%s); echo "test-under-load: run $$r of $(UNDER_LOAD_RUNS)"; \
	  $(MAKE) test || { echo "test-under-load: run $$r failed after $$(( $$(date +%s) - start )) s"; exit 1; }; \
	  echo "test-under-load: run $$r passed in $$(( $$(date +%s) - start )) s"; \
	done

e2e: tools sysdeps ## run only the end-to-end tests against the real CLIs
	$(GO_TEST_ENV) go test -count=1 -timeout 40m -run 'E2E' ./...

lint: ## go vet, gofmt, staticcheck (pinned in go.mod's tool block)
	go vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go tool staticcheck ./...

bench: tools ## benchmarks: idle run vs two curls and on long histories, ls over long histories, agent overhead (Claude, Codex, each ACP agent), relay rate (medians), outbox publishing, the idle tick after a flood and with a 50 MB envelope, each ACP agent's own cost, a pass over 1,000 threads, the blobhub-worker daemon next to the cron recipe over 100 idle threads
	$(GO_TEST_ENV) go test -run '^$$' -bench 'IdleRun' -benchtime 20x -count 1 ./e2e/
	$(GO_TEST_ENV) go test -run '^$$' -bench 'IdleHistory|ListHistory' -benchtime 10x -count 1 -timeout 30m ./e2e/
	$(GO_TEST_ENV) go test -run '^$$' -bench 'TurnOverhead' -benchtime 10x -count 1 ./e2e/
	$(GO_TEST_ENV) go test -run '^$$' -bench 'RelayItems' -benchtime 3x -count 1 ./e2e/
	$(GO_TEST_ENV) go test -run '^$$' -bench 'Agent' -benchtime 5x -count 1 ./acp/acptest
	go test -run '^$$' -bench . -count 1 ./blobhub/... ./policy/... ./envelope/...
	go test -run '^$$' -bench 'Publish' -benchmem -benchtime 3x -count 1 ./run/
	go test -run '^$$' -bench 'IdleTick' -benchtime 5x -count 1 ./run/
	go test -run '^$$' -bench 'FanOut' -benchtime 1x -count 1 -timeout 30m ./e2e/
	$(GO_TEST_ENV) go test -run '^$$' -bench 'PeerIdleFleet' -benchtime 1x -count 1 -timeout 20m ./e2e/

fuzz: ## run each fuzz test for 20 s
	@for pkg in $$(go list ./...); do \
	  for f in $$(go test -list 'Fuzz.*' $$pkg | grep ^Fuzz); do \
	    go test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s $$pkg || exit 1; \
	  done; \
	done

AGENT ?= claude_code
demo: tools-$(AGENT) build ## the whole flow offline with the pinned CLI and a scripted model (AGENT=gemini, qwen_code, opencode, copilot)
	@$(GO_TEST_ENV) go run ./scripts/demo -agent $(AGENT)

# MODEL_PORT keeps the stand-in on one port across restarts (a crontab's
# ANTHROPIC_BASE_URL stays right); empty, each start picks a free one.
MODEL_PORT ?= 0
model: ## keep the scripted model of make demo up for the README's by-hand walkthrough (MODEL_PORT=N: a fixed port); prints the exports, Ctrl-C stops it
	@echo "building the stand-in model (a few seconds the first time)"
	@go build -o bin/bhw-demo ./scripts/demo
	@exec bin/bhw-demo -serve -port $(MODEL_PORT)

LIVE_VARS := BHW_LIVE_API_URL BHW_LIVE_API_KEY BHW_LIVE_REVISION_ID BHW_LIVE_SESSION_ID

# With the four BHW_LIVE_* variables set, the conformance script runs
# against that real session (a throwaway thread, removed at the end);
# without them, the same script runs as a test against the test hub.
live-check: ## check a real BlobHub session answers as bhw-run expects (BHW_LIVE_*; else the test hub), and drive a real agy if installed
	@set=0; for v in $(LIVE_VARS); do [ -n "$${!v}" ] && set=$$((set+1)); done; \
	if [ $$set -eq 4 ]; then go run ./scripts/livecheck; \
	elif [ $$set -gt 0 ]; then echo "live-check: set all of $(LIVE_VARS), or none to check the test hub"; exit 2; \
	else echo "live-check: BHW_LIVE_* not set; running the check against the test hub"; \
	  go test -count=1 -v -run 'LiveCheck' ./scripts/livecheck/; fi
	@# Antigravity cannot be pinned here: a real agy (BHW_AGY_BIN, else agy on PATH) is driven when one is installed.
	@agy="$${BHW_AGY_BIN:-$$(command -v agy)}"; if [ -n "$$agy" ]; then BHW_AGY_BIN="$$agy" go test -tags realagy -count=1 -v -run 'TestRealAgy' ./antigravity/; \
	else echo "live-check: no agy installed (BHW_AGY_BIN); Antigravity stays checked against its stand-in only"; fi

clean: ## remove build outputs and installed tools
	rm -rf bin $(TOOLS)
