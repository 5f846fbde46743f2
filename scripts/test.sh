#!/usr/bin/env bash
# The whole test suite: Python venv, moto (local AWS), then fmt, clippy, the Rust tests and the template checks.
# Stops at the first failure; moto is stopped on exit whatever happens.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=scripts/aws-env.sh
source "${ROOT}/scripts/aws-env.sh"

# Each step's wall time, printed as a table at the end (where `make test`'s time goes).
STEP_NAMES=()
STEP_SECONDS=()
STEP_STARTED=""
SUITE_STARTED="$(date +%s)"

step() {
  local now
  now="$(date +%s)"
  if [[ -n "${STEP_STARTED}" ]]; then
    STEP_SECONDS+=("$((now - STEP_STARTED))")
  fi
  STEP_STARTED="${now}"
  STEP_NAMES+=("$*")
  printf '\n==> %s\n' "$*"
}

timings() {
  local i
  printf '\nwall time per step (total %d s):\n' "$(($(date +%s) - SUITE_STARTED))"
  for i in "${!STEP_SECONDS[@]}"; do
    printf '  %5d s  %s\n' "${STEP_SECONDS[$i]}" "${STEP_NAMES[$i]%% (*}"
  done
}

step "Python venv (.venv, requirements/test.txt)"
bash "${ROOT}/scripts/venv.sh"

step "linker"
# mold links much faster (scripts/linker.sh uses it when installed: `apt-get install mold`); make test installs no
# system package, so without it the default linker is used.
if command -v mold >/dev/null 2>&1; then
  echo "mold: $(command -v mold)"
else
  echo "mold not installed: linking with the default linker (slower; optional: apt-get install mold)"
fi

step "moto server (local AWS)"
moto_up "${ROOT}"
echo "AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL}"

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo clippy with the fault-injection crash points (built only for the fault suite)"
cargo clippy -p sqsafe-idempotency -p sqsafe --features sqsafe-idempotency/fault-injection -- -D warnings

step "cargo doc --workspace --no-deps, warnings denied"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "cargo test --workspace (all but the fault-injection suite)"
cargo test --workspace -- --skip _under_faults

step "fault-injection suite (figures and seed printed; SQSAFE_FAULT_SEED=<n> replays, SQSAFE_FAULTS_HEAVY=1 for more)"
cargo test -p sqsafe-e2e --test faults -- --nocapture --test-threads=1

step "template checks (scripts/template-checks.sh: sam validate, cfn-lint, sam build, rules, smoke deploy)"
bash "${ROOT}/scripts/template-checks.sh"

step "a new consumer in one command (scripts/scaffold-check.py: cargo xtask new-consumer in a scratch copy)"
packages=(-p sqsafe-local)
for crate in "${ROOT}"/functions/*/; do packages+=(-p "$(basename "${crate}")"); done
cargo build -q "${packages[@]}" --bins
"${ROOT}/.venv/bin/python" "${ROOT}/scripts/scaffold-check.py"

step "bench smoke (scripts/bench.sh --smoke: every peer and figure, a few batches; request counts, no timings)"
bash "${ROOT}/scripts/bench.sh" --smoke

step "all steps passed"
timings
