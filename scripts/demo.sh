#!/usr/bin/env bash
# `make demo`: the main job end to end on this machine. Installs the pinned tools (`sqsafe local venv`: .venv), builds
# the functions, then sqsafe-demo starts moto server, the payments APIs, the function under a local Lambda Runtime API and the event source
# mappings, runs the scenario, prints what happened, and stops everything it started.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

echo "==> building (the first run compiles the workspace: a few minutes on 2 cores)"
cargo build -p sqsafe-cli --bin sqsafe
target/debug/sqsafe local venv
cargo build -p sqsafe-e2e --bin sqsafe-demo -p charge-payment
echo "==> running the scenario"
exec cargo run -q -p sqsafe-e2e --bin sqsafe-demo -- "$@"
