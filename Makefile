# Entry points for the test suite and the demo. The scripts do the work; see scripts/.
SHELL := /bin/bash

.DEFAULT_GOAL := help
.PHONY: help test check demo book venv local local-watch moto local-resources bench bench-smoke bench-bill bench-api bench-kinesis bench-compare size model clean-venv

# Every function crate under functions/ (consumers added with `cargo xtask new-consumer` included).
FUNCTIONS := $(notdir $(wildcard functions/*))

help:
	@echo "Targets:"
	@echo "  make test        whole suite: venv, moto, fmt, clippy -D warnings, rustdoc -D warnings, cargo test, the"
	@echo "                   fault-injection suite, the template checks (sam validate, cfn-lint, sam build, rules,"
	@echo "                   smoke deploy, the rules' mutation corpus against sqsafe check), a new project from templates/project"
	@echo "                   outside the workspace, the book and its links"
	@echo "  make check       what a change can break, in minutes: the crates it touches and their dependents formatted,"
	@echo "                   clippy-checked and tested against moto (the model with the idempotency crate); the rest"
	@echo "                   is make test's (scripts/check-change.py; ARGS=\"--base REV\" to compare with another commit)"
	@echo "  make demo        the main job end to end: naive, key-only and sqsafe (claim and keyed mode) consumers fed the same deliveries"
	@echo "  make book        the book (book/src) built into book/book/ with a pinned mdBook (installed into .tools/ once),"
	@echo "                   its links and README.md's checked (scripts/book-check.py; a step of make test)"
	@echo "  make local       the whole pipeline by hand: moto, template.yaml's stack, the functions and their pollers, until Ctrl-C"
	@echo "                   (the functions under the local Lambda Runtime API: timeouts, crashes and cold starts as in Lambda;"
	@echo "                   charge-payment charges the fake payments API of crates/sqsafe-test-servers: scripts/local.sh)"
	@echo "  make local-watch the same, with each function that has an SQS mapping under cargo lambda watch: save a handler"
	@echo "                   and the next delivery runs it, no restart (ARGS=\"--visibility-timeout 10\" for quick redeliveries)"
	@echo "  make venv        sqsafe (target/debug/sqsafe), then .venv with the Python tools it pins (sqsafe local venv)"
	@echo "  make moto        make venv, then moto server in the foreground (sqsafe local moto); prints the env to export"
	@echo "  make local-resources  create template.yaml's tables and queues (without the stack name) in a running moto"
	@echo "                   (sqsafe local resources: the same code that creates them for make local and the tests)"
	@echo "  cargo xtask new-consumer NAME [--fifo] [--transact]   add a consumer (crate, sample event, template resources)"
	@echo "  make bench       sqsafe vs a naive consumer and Powertools on the same local AWS, plus criterion, and the bill"
	@echo "                   (capacity units and dollars per million messages: claim mode, keyed mode, Powertools): bench/RESULTS.md"
	@echo "  make bench-smoke the harness with a few batches per peer, request counts and the keyed mode's bill asserted"
	@echo "                   (a step of make test)"
	@echo "  make bench-bill  the bill alone, release builds: replaces that section of bench/RESULTS.md (about a minute)"
	@echo "  make bench-api   figure 8 alone (the idempotent HTTP layer), release build: replaces that section of bench/RESULTS.md"
	@echo "  make bench-kinesis  figure 9 alone (Kinesis batches beside Powertools' BatchProcessor, and the order of a batch"
	@echo "                   whose 4th record fails once), release builds: replaces that section of bench/RESULTS.md"
	@echo "  make bench-compare BASE=REV [HEAD=REV] [ARGS=...]  charge-payment at two commits (default head: the working"
	@echo "                   tree), claim and keyed modes run interleaved (CPU per message, wall per batch, first answer,"
	@echo "                   median and spread) and counted under callgrind (instructions per message, the functions that"
	@echo "                   moved): appended to bench/COMPARE.md (scripts/bench-compare.sh)"
	@echo "  make size        a team's consumer (templates/project, outside the workspace) against charge-payment, both release"
	@echo "                   builds for this machine: within 10%, figures appended to bench/SIZE.md (about ten minutes;"
	@echo "                   make test compares the two sam builds' arm64 bootstraps)"
	@echo "  make model       the claim protocol and the HTTP layer model-checked deeper than make test (release): states, depth, time, mutants, skew"
	@echo "  make clean-venv  delete the Python venv (.venv)"

test:
	bash scripts/test.sh

# The fault suite, the template and project checks are make test's: see scripts/check-change.py.
check: venv
	$(SQSAFE) local moto -- python3 scripts/check-change.py $(ARGS)

demo:
	bash scripts/demo.sh

book:
	bash scripts/book.sh

# sqsafe, the CLI a team installs, built from this checkout: it installs the pinned Python tools (`sqsafe local venv`:
# moto server, SAM CLI, cfn-lint, cargo-lambda; requirements/test.txt) and runs moto (`sqsafe local moto`). It knows
# no payments API: scripts/local.sh runs this repository's fake one (sqsafe-payments) beside `sqsafe local up` and
# gives its URL as charge-payment's PaymentsApiUrl.
SQSAFE := target/debug/sqsafe
PAYMENTS := cargo build -q -p sqsafe-test-servers --bin sqsafe-payments

# scripts/test.sh builds with CARGO_INCREMENTAL=0, and cargo's fingerprints include the setting: a build with the
# other one recompiles every crate of the workspace (ConfigSettingsChanged). These targets build what make test built
# (sqsafe, the functions, sqsafe-payments), so they use the same setting and find it fresh, and the reverse.
# (local-watch keeps incremental builds for the saves it rebuilds; cargo lambda watch builds in its own way anyway.)
venv local local-resources check: export CARGO_INCREMENTAL := 0

venv:
	@cargo build -q -p sqsafe-cli --bin sqsafe
	@$(SQSAFE) local venv

local: venv
	@echo "==> building the functions (the first run compiles the workspace: a few minutes on 2 cores)"
	cargo build $(addprefix -p ,$(FUNCTIONS)) --bins
	$(PAYMENTS)
	@bash scripts/local.sh $(ARGS)

local-watch: venv
	@echo "==> sqsafe builds each function as cargo lambda watch runs it (the first run: minutes)"
	$(PAYMENTS)
	@bash scripts/local.sh --watch $(ARGS)

moto: venv
	@$(SQSAFE) local moto

local-resources:
	@cargo build -q -p sqsafe-cli --bin sqsafe
	@$(SQSAFE) local resources

bench:
	bash scripts/bench.sh

bench-smoke:
	bash scripts/bench.sh --smoke

bench-bill:
	bash scripts/bench.sh --bill

bench-api:
	bash scripts/bench.sh --api

bench-kinesis:
	bash scripts/bench.sh --kinesis

bench-compare:
	@test -n "$(BASE)" || { echo "make bench-compare: name the base commit, BASE=REV" >&2; exit 2; }
	bash scripts/bench-compare.sh $(BASE) $(HEAD) $(ARGS)

size:
	.venv/bin/python scripts/size-check.py

model:
	cargo run --release -p sqsafe-model --bin sqsafe-model

clean-venv:
	rm -rf .venv
