#!/usr/bin/env bash
# Runs the criterion benchmarks and keeps their figures in crates/sqsafe-idempotency/benches/RESULTS.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
out="crates/sqsafe-idempotency/benches/RESULTS.md"
log="$(mktemp)"
trap 'rm -f "${log}"' EXIT
cargo bench -p sqsafe-idempotency --bench claim 2>&1 | tee "${log}"
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
} > "${out}"
echo "figures written to ${out}"
