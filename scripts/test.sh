#!/usr/bin/env bash
# The whole test suite: Python venv, moto (local AWS), then fmt, clippy, the Rust tests and the template checks.
# Stops at the first failure; moto is stopped on exit whatever happens.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=scripts/aws-env.sh
source "${ROOT}/scripts/aws-env.sh"

# A whole-suite run compiles each crate once: incremental caches (about 2 GB here) would only fill the disk.
export CARGO_INCREMENTAL=0

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
  printf '\n==> [%d s] %s\n' "$((now - SUITE_STARTED))" "$*"
}

timings() {
  local i
  printf '\nwall time per step (total %d s):\n' "$(($(date +%s) - SUITE_STARTED))"
  for i in "${!STEP_SECONDS[@]}"; do
    printf '  %5d s  %s\n' "${STEP_SECONDS[$i]}" "${STEP_NAMES[$i]%% (*}"
  done
}

# Where the time went is worth most when a step failed: the table is printed whatever the outcome.
# (A flag, not $?: the EXIT traps composed below run other commands first.)
SUITE_PASSED=""
print_timings_on_failure() {
  if [[ -z "${SUITE_PASSED}" ]]; then
    STEP_SECONDS+=("$(($(date +%s) - STEP_STARTED))")
    timings
    echo "test.sh: stopped in the step above, after $(($(date +%s) - SUITE_STARTED)) s" >&2
  fi
}

step "Python venv (.venv, requirements/test.txt)"
bash "${ROOT}/scripts/venv.sh"

step "moto server (local AWS)"
moto_up "${ROOT}"
# One EXIT trap: the timings (on failure), then every background step's process group and folder, then moto's own
# trap (set by moto_up: it stops moto when this script started it).
MOTO_TRAP="$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")"
BACKGROUND_PIDS=()
BACKGROUND_DIRS=()
cleanup() {
  print_timings_on_failure
  local pid
  for pid in "${BACKGROUND_PIDS[@]}"; do
    kill -- "-${pid}" 2>/dev/null || true
  done
  if [[ "${#BACKGROUND_DIRS[@]}" -gt 0 ]]; then
    rm -rf "${BACKGROUND_DIRS[@]}"
  fi
  eval "${MOTO_TRAP}"
}
trap cleanup EXIT
echo "AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL}"

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "features check (scripts/features-check.py: one set of third-party features, whatever cargo builds)"
python3 "${ROOT}/scripts/features-check.py"

step "dependents check (scripts/dependents-check.py: what a crate outside the workspace that depends on sqsafe gets)"
python3 "${ROOT}/scripts/dependents-check.py"

step "cargo package: the libraries a team depends on, each with its metadata, in dependency order (not built here)"
# --no-verify: verifying compiles each library with the AWS SDK once more, alone, in its own folder (minutes on 2
# cores); here cargo checks each manifest, its metadata and files, and resolves it against the registry.
# The libraries are the ones .config/hakari.toml keeps off the workspace-hack.
library_args=()
while read -r library; do library_args+=(-p "${library}"); done < <(python3 -c '
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["final-excludes"]["workspace-members"]))
' "${ROOT}/.config/hakari.toml")
cargo package --no-verify --allow-dirty --quiet "${library_args[@]}"
echo "cargo package: $((${#library_args[@]} / 2)) libraries packaged into ${ROOT}/target/package"

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo clippy with the fault-injection crash points (built only for the fault suite)"
# With -p sqsafe-workspace-hack: the libraries do not depend on it (.config/hakari.toml), and without it this
# selection would check tokio, hyper and the AWS SDK again with other features.
cargo clippy -p sqsafe-idempotency -p sqsafe -p sqsafe-workspace-hack --features sqsafe-idempotency/fault-injection \
  -- -D warnings

step "template checks: started in the background beside cargo doc and cargo test (their output follows later)"
# sam build (release, cross-compiled) is the longest single step; cargo test spends much of its time waiting on moto,
# queue timeouts and function processes. Side by side they take about the time of the longer. sam build compiles in
# its own target folder (target/sam: its own cargo lock, and release builds share nothing with the dev ones anyway).
TEMPLATE_DIR="$(mktemp -d)"
export TEMPLATE_DIR
setsid bash -c '
  started="$(date +%s)"
  rc=0
  CARGO_TARGET_DIR="'"${ROOT}"'/target/sam" bash "'"${ROOT}"'/scripts/template-checks.sh" >"${TEMPLATE_DIR}/log" 2>&1 \
    || rc=$?
  echo "$(($(date +%s) - started))" >"${TEMPLATE_DIR}/seconds"
  echo "${rc}" >"${TEMPLATE_DIR}/rc"
' &
TEMPLATE_PID=$!
BACKGROUND_PIDS+=("${TEMPLATE_PID}")
BACKGROUND_DIRS+=("${TEMPLATE_DIR}")
echo "running in the background (pid ${TEMPLATE_PID})"

step "cargo doc --workspace --no-deps, warnings denied"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "cargo test --workspace (all but the fault-injection suite)"
cargo test --workspace -- --skip _under_faults
# What really linked (scripts/linker.sh): the linker a binary records in its .comment section.
echo "linker: $(readelf -p .comment "${ROOT}/target/debug/sqsafe-local" 2>/dev/null | grep -o 'Linker: .*' | cut -c1-40 || echo unknown)"

step "fault-injection suite: built now, run in the background beside the next steps (its output follows them)"
# The suite spends its minutes waiting on visibility timeouts, lease expiries and SIGKILLed functions, the template
# and scaffold checks compiling: side by side they take the time of the longer one. Figures and seed are printed
# when it ends (SQSAFE_FAULT_SEED=<n> replays, SQSAFE_FAULTS_HEAVY=1 for more).
# Built here, the suite's binary and the fault-injection builds of the functions (the suite builds them once, at its
# start, as a no-op), so that the suite needs cargo's lock no more while sam build holds it.
cargo test -p sqsafe-e2e --test faults --no-run
cargo build -q -p charge-payment -p apply-ledger --features charge-payment/fault-injection,apply-ledger/fault-injection
FAULTS_DIR="$(mktemp -d)"
export FAULTS_DIR
# Its own process group (setsid), so that a failure later can stop the suite with everything it started.
setsid bash -c '
  started="$(date +%s)"
  rc=0
  cargo test -p sqsafe-e2e --test faults -- --nocapture --test-threads=1 >"${FAULTS_DIR}/log" 2>&1 || rc=$?
  echo "$(($(date +%s) - started))" >"${FAULTS_DIR}/seconds"
  echo "${rc}" >"${FAULTS_DIR}/rc"
' &
FAULTS_PID=$!
# Stopped with the suite if a later step fails (the EXIT trap).
BACKGROUND_PIDS+=("${FAULTS_PID}")
BACKGROUND_DIRS+=("${FAULTS_DIR}")
echo "running in the background (pid ${FAULTS_PID}); its output is printed after the scaffold check and the bench smoke"

step "template checks: their output (sam validate, cfn-lint, sam build, rules, smoke deploy; run since the step above)"
wait "${TEMPLATE_PID}" || true
cat "${TEMPLATE_DIR}/log"
template_rc="$(cat "${TEMPLATE_DIR}/rc" 2>/dev/null || echo 1)"
echo "(the template checks took $(cat "${TEMPLATE_DIR}/seconds" 2>/dev/null || echo '?') s of wall time, beside the steps above)"
if [[ "${template_rc}" != "0" ]]; then
  echo "test.sh: FAILED: the template checks (exit ${template_rc}); their output is above" >&2
  exit "${template_rc}"
fi

step "bench smoke: started in the background beside the scaffold check (its output follows it)"
# The smoke waits on its own moto and the peers' pipelines; the scaffold check compiles. Side by side.
BENCH_DIR="$(mktemp -d)"
export BENCH_DIR
setsid bash -c '
  started="$(date +%s)"
  rc=0
  bash "'"${ROOT}"'/scripts/bench.sh" --smoke >"${BENCH_DIR}/log" 2>&1 || rc=$?
  echo "$(($(date +%s) - started))" >"${BENCH_DIR}/seconds"
  echo "${rc}" >"${BENCH_DIR}/rc"
' &
BENCH_PID=$!
BACKGROUND_PIDS+=("${BENCH_PID}")
BACKGROUND_DIRS+=("${BENCH_DIR}")
echo "running in the background (pid ${BENCH_PID})"

step "a new consumer in one command (scripts/scaffold-check.py: cargo xtask new-consumer in a scratch copy)"
packages=(-p sqsafe-local)
for crate in "${ROOT}"/functions/*/; do packages+=(-p "$(basename "${crate}")"); done
cargo build -q "${packages[@]}" --bins
"${ROOT}/.venv/bin/python" "${ROOT}/scripts/scaffold-check.py"

step "bench smoke: its output (every peer and figure, a few batches; request counts, no timings)"
wait "${BENCH_PID}" || true
cat "${BENCH_DIR}/log"
bench_rc="$(cat "${BENCH_DIR}/rc" 2>/dev/null || echo 1)"
echo "(the bench smoke took $(cat "${BENCH_DIR}/seconds" 2>/dev/null || echo '?') s of wall time, beside the scaffold check)"
if [[ "${bench_rc}" != "0" ]]; then
  echo "test.sh: FAILED: the bench smoke (exit ${bench_rc}); its output is above" >&2
  exit "${bench_rc}"
fi

step "fault-injection suite: its output (it ran in the background since the step of that name)"
wait "${FAULTS_PID}" || true
cat "${FAULTS_DIR}/log"
faults_rc="$(cat "${FAULTS_DIR}/rc" 2>/dev/null || echo 1)"
echo "(the fault-injection suite took $(cat "${FAULTS_DIR}/seconds" 2>/dev/null || echo '?') s of wall time, beside the steps above)"
if [[ "${faults_rc}" != "0" ]]; then
  echo "test.sh: FAILED: the fault-injection suite (exit ${faults_rc}); its output is above" >&2
  exit "${faults_rc}"
fi

step "all steps passed"
SUITE_PASSED=1
timings
