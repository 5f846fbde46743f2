#!/usr/bin/env bash
# `make bench`: sqsafe's charge-payment against a naive Rust consumer and Powertools for AWS Lambda (Python), same
# events, same local AWS (bench/README.md), then the criterion benchmarks.
#
#   scripts/bench.sh          release builds; writes bench/RESULTS.md, bench/batch-latency.png and
#                             crates/sqsafe-idempotency/benches/RESULTS.md (~6 min on 2 cores once built)
#   scripts/bench.sh --smoke  what `make test` runs: debug builds, a few batches per peer, results in a temporary
#                             folder (removed unless SQSAFE_BENCH_KEEP=1); fails on a wrong request count or on the
#                             keyed mode's bill, never on a timing
#   scripts/bench.sh --bill   release builds; the bill alone (figure 1b: the claim mode, the keyed mode, Powertools),
#                             replacing that section of bench/RESULTS.md and nothing else (about a minute once built)
#   scripts/bench.sh --api    release build of the driver; figure 8 alone (the idempotent HTTP layer beside the same
#                             axum handler without it), replacing that section of bench/RESULTS.md and nothing else
#                             (about 30 s once built)
#   scripts/bench.sh --kinesis release builds; figure 9 alone (Kinesis batches: the claim and keyed modes beside
#                             Powertools' BatchProcessor, and the order of a batch whose 4th record fails once),
#                             replacing that section of bench/RESULTS.md and nothing else
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

mode=full
case "${1:-}" in
  "") ;;
  --smoke) mode=smoke ;;
  --bill) mode=bill ;;
  --api) mode=api ;;
  --kinesis) mode=kinesis ;;
  *) echo "usage: scripts/bench.sh [--smoke | --bill | --api | --kinesis]" >&2; exit 2 ;;
esac
step() { printf '\n==> %s\n' "$*"; }
started="${SECONDS}"
# Rust peers and the driver; the Powertools peer runs from bench/peers/powertools.
packages=(-p charge-payment -p naive-rust -p sqsafe-bench)

step "venvs: .venv (moto server) and .venv-bench (Powertools, awslambdaric, matplotlib)"
cargo build -q -p sqsafe-cli --bin sqsafe
target/debug/sqsafe local venv
bash scripts/bench-venv.sh

if [[ "${mode}" == smoke ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sqsafe-bench-smoke.XXXXXX")"
  if [[ "${SQSAFE_BENCH_KEEP:-0}" != 1 ]]; then
    # shellcheck disable=SC2064  # expand the path now, on purpose
    trap "rm -rf '${out}'" EXIT
  fi
  step "build (debug)"
  cargo build -q "${packages[@]}" --bins
  step "smoke: a few batches per peer (timings mean nothing; request counts are asserted)"
  target/debug/sqsafe-bench --smoke --bins target/debug --out "${out}/results.json"
  .venv-bench/bin/python bench/render.py "${out}/results.json" --md "${out}/RESULTS.md" --png "${out}/batch-latency.png"
  for file in results.json RESULTS.md batch-latency.png; do
    [[ -s "${out}/${file}" ]] || { echo "bench smoke: ${file} was not written" >&2; exit 1; }
  done
  grep -q '^## 1. DynamoDB requests per message' "${out}/RESULTS.md"
  grep -q '^## 1b. The bill' "${out}/RESULTS.md"
  grep -q '^## 8. The idempotent HTTP layer' "${out}/RESULTS.md"
  grep -q '^## 9. Kinesis batches' "${out}/RESULTS.md"
  echo "bench smoke passed in $((SECONDS - started)) s (results in ${out})"
  exit 0
fi

if [[ "${mode}" == api ]]; then
  step "build (release): the driver, which runs the layer in its own process"
  cargo build --release -p sqsafe-bench --bin sqsafe-bench
  step "figure 8 alone: the idempotent HTTP layer beside the plain handler (crates/sqsafe-bench --api-only)"
  target/release/sqsafe-bench --api-only --out target/bench/api.json
  .venv-bench/bin/python bench/render.py target/bench/api.json --md bench/RESULTS.md --api-only
  echo "make bench-api done in $((SECONDS - started)) s"
  exit 0
fi

step "build (release)"
# With symbols: the profile runs read perf samples by symbol (the workspace's release profile strips them for Lambda).
CARGO_PROFILE_RELEASE_STRIP=none cargo build --release "${packages[@]}" --bins

if [[ "${mode}" == kinesis ]]; then
  step "figure 9 alone: Kinesis batches, the claim and keyed modes beside Powertools (crates/sqsafe-bench --kinesis-only)"
  target/release/sqsafe-bench --kinesis-only --bins target/release --out target/bench/kinesis.json
  .venv-bench/bin/python bench/render.py target/bench/kinesis.json --md bench/RESULTS.md --kinesis-only
  echo "make bench-kinesis done in $((SECONDS - started)) s"
  exit 0
fi

if [[ "${mode}" == bill ]]; then
  step "the bill alone: claim mode, keyed mode, Powertools (crates/sqsafe-bench --bill-only)"
  target/release/sqsafe-bench --bill-only --bins target/release --out target/bench/bill.json
  .venv-bench/bin/python bench/render.py target/bench/bill.json --md bench/RESULTS.md --bill-only
  echo "make bench-bill done in $((SECONDS - started)) s"
  exit 0
fi

step "peers on the local AWS (crates/sqsafe-bench)"
target/release/sqsafe-bench --bins target/release --out target/bench/results.json

step "criterion: the toolkit per message (crates/sqsafe-bench/benches/toolkit.rs)"
cargo bench -p sqsafe-bench --bench toolkit

step "criterion: the idempotency core (crates/sqsafe-idempotency/benches/claim.rs)"
claim_results="crates/sqsafe-idempotency/benches/RESULTS.md"
log="$(mktemp)"
trap 'rm -f "${log}"' EXIT
cargo bench -p sqsafe-idempotency -p sqsafe-workspace-hack --bench claim 2>&1 | tee "${log}"
{
  echo "# sqsafe-idempotency benchmark results"
  echo
  echo "Written by \`make bench\` (scripts/bench.sh) from criterion's output; the middle figure is the estimate."
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "- rustc: $(rustc --version)"
  echo
  echo '```text'
  # criterion prints the name on one line and "time: [low est high]" on the same or the next line.
  awk '/time:/ { if ($1 == "time:") print prev, $0; else print $0 } { prev = $0 }' "${log}" | sed 's/  */ /g'
  echo '```'
} > "${claim_results}"

step "bench/RESULTS.md and bench/batch-latency.png"
.venv-bench/bin/python bench/render.py target/bench/results.json --criterion target/criterion \
  --md bench/RESULTS.md --png bench/batch-latency.png
echo "make bench done in $((SECONDS - started)) s"
