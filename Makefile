# Entry points for the test suite and the demo. The scripts do the work; see scripts/.
SHELL := /bin/bash

.DEFAULT_GOAL := help
.PHONY: help test demo local moto local-resources bench clean-venv

help:
	@echo "Targets:"
	@echo "  make test        whole suite: venv, moto, cargo fmt --check, clippy -D warnings, cargo test"
	@echo "  make demo        run the idempotency demo (cargo example) against a local moto server"
	@echo "  make local       the whole pipeline by hand: moto, template.yaml's stack, the functions and their pollers, until Ctrl-C"
	@echo "  make moto        run moto server in the foreground and print the env vars to export"
	@echo "  make local-resources  create the tables and DLQs the functions' READMEs use, in a running moto"
	@echo "  make bench       criterion benchmarks; figures kept in crates/sqsafe-idempotency/benches/RESULTS.md"
	@echo "  make clean-venv  delete the Python venv (.venv)"

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

local:
	@bash scripts/venv.sh
	cargo build -q -p charge-payment -p apply-ledger -p sqsafe-local --bins
	target/debug/sqsafe-local up

moto:
	@bash scripts/venv.sh
	@bash scripts/moto.sh run

local-resources:
	@bash scripts/venv.sh
	@.venv/bin/python scripts/local-resources.py

bench:
	bash scripts/bench.sh

clean-venv:
	rm -rf .venv
