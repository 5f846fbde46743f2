#!/usr/bin/env bash
# The whole test suite: sqsafe (the CLI) built first, which installs the pinned Python tools (`sqsafe local venv`)
# and runs moto, the local AWS (`sqsafe local moto -- scripts/test.sh`: the rest of this script runs under it, and moto
# stops when it ends, whatever happens); then fmt, clippy, the Rust tests, the template checks, a new project.
# Stops at the first failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

# A whole-suite run compiles each crate once: incremental caches (about 2 GB here) would only fill the disk.
export CARGO_INCREMENTAL=0

# Each step's wall time and CPU time (user + system, of everything it ran), printed as a table at the end: where
# `make test`'s time goes, and why it depends on the machine (on 2 cores, wall time is about the CPU time of all steps,
# the background ones included, over 2).
STEP_NAMES=()
STEP_SECONDS=()
STEP_CPU=()
STEP_STARTED=""
STEP_CPU_STARTED=0
SUITE_STARTED="${SQSAFE_SUITE_STARTED:-$(date +%s)}"
# The steps before moto (SQSAFE_SUITE_PRELUDE, one "wall cpu name" line each), measured by this script's first run,
# which then ran the rest under `sqsafe local moto`: their CPU counts in the total (PRELUDE_CPU).
PRELUDE_CPU=0
if [[ -n "${SQSAFE_SUITE_PRELUDE:-}" ]]; then
  while read -r wall cpu name; do
    STEP_SECONDS+=("${wall}")
    STEP_CPU+=("${cpu}")
    STEP_NAMES+=("${name}")
    PRELUDE_CPU=$((PRELUDE_CPU + cpu))
  done <<<"${SQSAFE_SUITE_PRELUDE}"
fi
# CPU seconds of the background jobs that ended during the current step: theirs, not the step's. (This shell adds a
# child's CPU time to its own children's when it reaps it, which it does as soon as the child exits, whatever step
# runs then: see account_ended_background.)
REAPED_CPU=0
BACKGROUND_NAMES=()
BACKGROUND_TIMES=()

# children_cpu: sets CHILDREN_CPU to the CPU seconds (user + system) of every child this shell has waited for, so far.
# (`times` in this shell, into a file, never in a pipe or $(...): a fork's children's times start at 0.)
TIMES_FILE="$(mktemp)"
CHILDREN_CPU=0
children_cpu() {
  times >"${TIMES_FILE}"
  CHILDREN_CPU="$(times_cpu "${TIMES_FILE}")"
}

# times_cpu FILE: the children's CPU seconds (user + system) in a file `times` wrote (its second line: "1m2.5s 0m3.1s").
times_cpu() {
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
    printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"
}

# account_ended_background: each background job that has ended since the last call (its rc file is its last write) is
# reaped now, if it was not yet, and its CPU time counted as reaped in the current step.
declare -A BACKGROUND_PID_OF BACKGROUND_DIR_OF BACKGROUND_ACCOUNTED
account_ended_background() {
  local name dir cpu
  for name in "${!BACKGROUND_DIR_OF[@]}"; do
    dir="${BACKGROUND_DIR_OF["${name}"]}"
    if [[ -n "${BACKGROUND_ACCOUNTED["${name}"]:-}" || ! -f "${dir}/rc" ]]; then
      continue
    fi
    wait "${BACKGROUND_PID_OF["${name}"]}" 2>/dev/null || true
    cpu="$(times_cpu "${dir}/times" 2>/dev/null || true)"
    cpu="${cpu:-0}"
    REAPED_CPU=$((REAPED_CPU + cpu))
    BACKGROUND_ACCOUNTED["${name}"]=1
  done
}

step() {
  local now
  now="$(date +%s)"
  account_ended_background
  children_cpu
  if [[ -n "${STEP_STARTED}" ]]; then
    STEP_SECONDS+=("$((now - STEP_STARTED))")
    STEP_CPU+=("$((CHILDREN_CPU - STEP_CPU_STARTED - REAPED_CPU))")
  fi
  STEP_STARTED="${now}"
  STEP_CPU_STARTED="${CHILDREN_CPU}"
  REAPED_CPU=0
  STEP_NAMES+=("$*")
  printf '\n==> [%d s] %s\n' "$((now - SUITE_STARTED))" "$*"
}

timings() {
  local i
  account_ended_background
  children_cpu
  printf '\nwall and CPU time per step (total %d s of wall time, %d s of CPU time):\n' \
    "$(($(date +%s) - SUITE_STARTED))" "$((CHILDREN_CPU + PRELUDE_CPU))"
  printf '  %5s    %5s\n' wall cpu
  for i in "${!STEP_SECONDS[@]}"; do
    printf '  %5d s  %5s s  %s\n' "${STEP_SECONDS[$i]}" "${STEP_CPU[$i]:-?}" "${STEP_NAMES[$i]%% (*}"
  done
  if [[ "${#BACKGROUND_NAMES[@]}" -gt 0 ]]; then
    printf 'in the background, beside the steps above:\n'
    for i in "${!BACKGROUND_NAMES[@]}"; do
      printf '  %s  %s\n' "${BACKGROUND_TIMES[$i]}" "${BACKGROUND_NAMES[$i]}"
    done
  fi
}

# Where the time went is worth most when a step failed: the table is printed whatever the outcome.
# (A flag, not $?: the EXIT traps composed below run other commands first.)
SUITE_PASSED=""
print_timings_on_failure() {
  if [[ -z "${SUITE_PASSED}" ]]; then
    STEP_SECONDS+=("$(($(date +%s) - STEP_STARTED))")
    account_ended_background
    children_cpu
    STEP_CPU+=("$((CHILDREN_CPU - STEP_CPU_STARTED - REAPED_CPU))")
    timings
    echo "test.sh: stopped in the step above, after $(($(date +%s) - SUITE_STARTED)) s" >&2
  fi
}

# One EXIT trap: the timings (on failure), then every background step's process group and folder. (Moto is
# `sqsafe local moto`'s: it stops moto once this script has ended.)
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
  rm -f "${TIMES_FILE}"
}
trap cleanup EXIT

# background NAME COMMAND...: runs COMMAND beside the next steps, in its own process group (setsid: a failure later
# stops it with everything it started, see cleanup), its output kept in a folder of its own until
# `report_background NAME` waits for it, prints that output and its wall time, and fails the suite with its exit code.
background() {
  local name="$1" dir
  shift
  dir="$(mktemp -d)"
  setsid bash -c '
    dir="$1"
    shift
    started="$(date +%s)"
    rc=0
    "$@" >"${dir}/log" 2>&1 || rc=$?
    echo "$(($(date +%s) - started))" >"${dir}/seconds"
    # Its CPU time: what this shell'"'"'s children (the command and what it waited for) used.
    times >"${dir}/times"
    echo "${rc}" >"${dir}/rc"
  ' background "${dir}" "$@" &
  BACKGROUND_PID_OF["${name}"]=$!
  BACKGROUND_DIR_OF["${name}"]="${dir}"
  BACKGROUND_PIDS+=("$!")
  BACKGROUND_DIRS+=("${dir}")
  echo "${name}: running in the background (pid $!)"
}

# report_background NAME BESIDE: see background; BESIDE says what it ran beside, for the wall-time line.
report_background() {
  local name="$1" beside="$2" dir rc
  dir="${BACKGROUND_DIR_OF["${name}"]}"
  wait "${BACKGROUND_PID_OF["${name}"]}" 2>/dev/null || true
  cat "${dir}/log"
  rc="$(cat "${dir}/rc" 2>/dev/null || echo 1)"
  local seconds cpu
  seconds="$(cat "${dir}/seconds" 2>/dev/null || echo '?')"
  cpu="$(times_cpu "${dir}/times" 2>/dev/null || true)"
  account_ended_background
  BACKGROUND_NAMES+=("${name}")
  BACKGROUND_TIMES+=("$(printf '%5s s  %5s s' "${seconds}" "${cpu:-?}")")
  echo "(${name} took ${seconds} s of wall time and ${cpu:-?} s of CPU time, beside ${beside})"
  if [[ "${rc}" != "0" ]]; then
    echo "test.sh: FAILED: ${name} (exit ${rc}); its output is above" >&2
    exit "${rc}"
  fi
}

# The first run: sqsafe, the pinned Python tools, then the rest of this script again under `sqsafe local moto`, which
# starts moto on a free loopback port, points every AWS client at it (AWS_ENDPOINT_URL, SQSAFE_TEST_ENDPOINT, test
# credentials, us-east-1), and stops it when the script ends. sqsafe is built alone, as a team installs it, and copied
# into a folder of its own that later builds do not touch (the cargo lambda watch test runs that copy).
INSTALLED_BIN="${ROOT}/target/sqsafe-installed"
if [[ -z "${SQSAFE_SUITE_UNDER_MOTO:-}" ]]; then
  # The functions' release builds (the template checks' sam build, the project check's make build) and the checks that
  # compare them (size, dependents) all build for one architecture, decided here, before anything is built, and
  # exported to every step (scripts/build_arch.py): a step that read the machine at its own moment once built x86_64
  # while another, after the std was added, built arm64.
  step "build architecture for the Lambda functions: decided once for every step (scripts/build_arch.py)"
  IFS=$'\t' read -r SQSAFE_BUILD_ARCH SQSAFE_BUILD_ARCH_REASON < <(python3 "${ROOT}/scripts/build_arch.py" --decide)
  [[ -n "${SQSAFE_BUILD_ARCH}" ]] || { echo "test.sh: scripts/build_arch.py decided no architecture" >&2; exit 1; }
  export SQSAFE_BUILD_ARCH SQSAFE_BUILD_ARCH_REASON
  echo "SQSAFE_BUILD_ARCH=${SQSAFE_BUILD_ARCH} (${SQSAFE_BUILD_ARCH_REASON})"
  step "sqsafe, the CLI, and charge-payment (debug; sqsafe installs the Python tools and runs moto for the steps below)"
  cargo build -q -p sqsafe-cli --bin sqsafe
  mkdir -p "${INSTALLED_BIN}"
  cp "${ROOT}/target/debug/sqsafe" "${INSTALLED_BIN}/"
  # charge-payment's debug binary: the project check compares its consumer's with it when it starts (a later step
  # rebuilds it with the fault-injection crash points).
  cargo build -q -p charge-payment
  # The project check's sqsafe install folder starts as a copy of this build (cp -a keeps the times cargo's
  # fingerprints compare): the project's make test installs sqsafe from this checkout (cargo install --debug --path,
  # into <its target folder>/sqsafe-cli: install-sqsafe.py says why a path source has a folder of its own) and finds it
  # built, instead of compiling sqsafe-cli and the AWS SDK a second time, and it never waits for cargo's lock on
  # target/, which the steps below hold for minutes. The copy leaves out what cargo install does not read: the
  # incremental caches and the executables of earlier runs (test binaries, other crates' bins: on a warm tree 4.6 of
  # target/debug's 8 GB; pax keeps the nanoseconds of the times). The rest of target/project-check (the project's
  # third-party crates) is kept between runs (project-check.py, discard_project_outputs).
  rm -rf "${ROOT}/target/project-check/sqsafe-cli"
  mkdir -p "${ROOT}/target/project-check/sqsafe-cli"
  (cd "${ROOT}/target" && find debug \( -path debug/incremental -o -path debug/examples \) -prune -o \
    \( -path 'debug/deps/*' -type f -perm -u+x ! -name '*.so' ! -name 'sqsafe-*' \) -o -print0 |
    tar --format=posix --null --no-recursion -T - -cf - | tar -C "${ROOT}/target/project-check/sqsafe-cli" -xf -)
  step "Python venv: sqsafe local venv (.venv, requirements/test.txt: pip installs the pinned uv, uv the rest)"
  "${INSTALLED_BIN}/sqsafe" local venv
  step "every step that builds or compares the release build asked its architecture (build_arch.py --check)"
  # Before any release build starts: each of them prints the decision, with a rustup on PATH that says the opposite.
  "${ROOT}/.venv/bin/python" "${ROOT}/scripts/build_arch.py" --check
  step "moto server: sqsafe local moto -- scripts/test.sh (every step below runs under it)"
  prelude=""
  for i in "${!STEP_SECONDS[@]}"; do
    prelude+="${STEP_SECONDS[$i]} ${STEP_CPU[$i]} ${STEP_NAMES[$i]}"$'\n'
  done
  # Its own table on failure, from here on: the run under moto prints this one's rows with its own.
  SUITE_PASSED=1
  exec env SQSAFE_SUITE_UNDER_MOTO=1 SQSAFE_SUITE_STARTED="${SUITE_STARTED}" SQSAFE_SUITE_PRELUDE="${prelude%$'\n'}" \
    SQSAFE_SUITE_STEP_STARTED="${STEP_STARTED}" SQSAFE_SUITE_STEP_NAME="${STEP_NAMES[-1]}" \
    "${INSTALLED_BIN}/sqsafe" local moto -- bash "${BASH_SOURCE[0]}" "$@"
fi
# Under moto: the step that started it runs until the first step below.
STEP_NAMES+=("${SQSAFE_SUITE_STEP_NAME:-moto server: sqsafe local moto}")
STEP_STARTED="${SQSAFE_SUITE_STEP_STARTED:-$(date +%s)}"
[[ -n "${AWS_ENDPOINT_URL:-}" ]] || { echo "test.sh: SQSAFE_SUITE_UNDER_MOTO is set but AWS_ENDPOINT_URL is not" >&2; exit 1; }
echo "AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL}"

# The release builds (the template checks' sam build, the project check's make build: the AWS SDK and the functions for
# the Lambda, in one target folder, one after the other under cargo's lock) are the longest chain of the suite: about
# 700 s of CPU that, sharing the cores evenly, ended minutes after every other step. They get the cores first (a
# niceness of -5, where the suite runs as root, as CI does); the steps beside them have time to spare.
RELEASE_NICE=()
if [[ "$(id -u)" == "0" ]]; then
  RELEASE_NICE=(nice -n -5)
  export SQSAFE_RELEASE_NICE=-5
fi

step "template checks: started in the background beside every cargo step below (their output follows cargo test)"
# sam build (release, cross-compiled) is the longest single step; cargo test spends much of its time waiting on moto,
# queue timeouts and function processes. Side by side they take about the time of the longer. sam build compiles in
# its own target folder (target/sam: its own cargo lock, and release builds share nothing with the dev ones anyway),
# which the project check's release build shares.
background "the template checks" "${RELEASE_NICE[@]}" env CARGO_TARGET_DIR="${ROOT}/target/sam" \
  SQSAFE_RUST_RULES_LATER=1 bash "${ROOT}/scripts/template-checks.sh"
# The book (scripts/book.sh: the pinned mdBook installed once into .tools/, the book built, its links checked).
background "the book" bash "${ROOT}/scripts/book.sh"

step "a new project outside the workspace: started in the background beside every cargo step below (output later)"
# scripts/project-check.py: sam init --location templates/project, its own make test (which must fail without the DLQ
# grant), its tests (which must fail with the effect broken), its template's checks, sqsafe new consumer, the local
# pipeline under cargo lambda watch (`sqsafe local up --watch`), and beside them the project's own `make build` of its
# consumer (sam build, release, for the release size check at the end). The longest step: it starts first.
# It runs the sqsafe the project's own make test installs (cargo install from this checkout, as a team's from a tag).
# It builds the project in a target folder of its own (target/project-check, seeded above with sqsafe's build): a
# dependent gets its own features (no workspace-hack), so the rest would be compiled anew anyway, and it never waits
# for cargo's lock on target/. Its minutes of waiting (sam, cargo lambda watch, queues) pass beside the compiling steps.
# Its make build compiles in the template checks' target folder (target/sam): the functions' release build resolves
# features as a team's consumer does (default-members, no workspace-hack for the Lambda target), so whichever of the
# two builds gets cargo's lock first compiles the AWS SDK, tokio, hyper and rustls for both.
background "the project check" env SQSAFE_PROJECT_TARGET="${ROOT}/target/project-check" \
  SQSAFE_PROJECT_RELEASE_TARGET="${ROOT}/target/sam" "${ROOT}/.venv/bin/python" "${ROOT}/scripts/project-check.py"

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "manifest checks and the moto launcher's tests: in the background beside clippy (output after it)"
# Light on CPU and mostly waiting (cargo tree, moto servers starting): beside clippy they cost it little and save the
# minute they took in front of it. Their output follows clippy's; a failure fails the suite there.
# features-check.py: one set of third-party features, whatever cargo builds; dependents-check.py: what a crate outside
# the workspace that depends on sqsafe gets; targets-check.py: no test in a target that cargo test does not build.
background "the manifest checks" bash -c 'set -e
  for check in features-check dependents-check targets-check; do
    echo "--> scripts/${check}.py"
    python3 "$1/scripts/${check}.py"
  done' manifest-checks "${ROOT}"
# tests/moto: the moto launcher (crates/sqsafe-local/src/moto_server.py) makes moto's conditional writes atomic.
# tests/scripts: the one build architecture (scripts/build_arch.py), its decision and its check; the project template's
# make build without the aarch64 std; what the project check leaves in its target folders.
background "the moto launcher's tests" "${ROOT}/.venv/bin/python" -m pytest -q tests/moto tests/scripts

step "cargo package: the libraries a team depends on, with their metadata, in the background (output at the end)"
# --no-verify: verifying compiles each library with the AWS SDK once more, alone, in its own folder (minutes on 2
# cores); here cargo checks each manifest, its metadata and files, and resolves it against the registry.
# It waits mostly on the registry's index, so it runs in the background, in a target folder of its own (no wait on
# cargo's build lock), and reports at the end. The libraries: those .config/hakari.toml keeps off the hack that may
# be published (sqsafe-local, a dev-dependency of consumers' tests, is kept off the hack but not published).
library_args=()
while read -r library; do library_args+=(-p "${library}"); done < <(cargo metadata --no-deps --format-version 1 |
  python3 -c '
import json, sys, tomllib
libraries = tomllib.load(open(sys.argv[1], "rb"))["final-excludes"]["workspace-members"]
published = {p["name"] for p in json.load(sys.stdin)["packages"] if p["publish"] != []}
print("\n".join(name for name in libraries if name in published))
' "${ROOT}/.config/hakari.toml")
background "cargo package" env CARGO_TARGET_DIR="${ROOT}/target/package-check" \
  cargo package --no-verify --allow-dirty "${library_args[@]}"

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "manifest checks and the moto launcher's tests: their output (features, dependents, targets; tests/moto)"
report_background "the manifest checks" "clippy"
report_background "the moto launcher's tests" "clippy"

step "cargo clippy with the fault-injection crash points (built only for the fault suite)"
# With -p sqsafe-workspace-hack: the libraries do not depend on it (.config/hakari.toml), and without it this
# selection would check tokio, hyper and the AWS SDK again with other features.
# charge-payment with its feature: its example charge-payment-changes (the fault suite's DynamoDB-stream consumer) is
# built only with it.
cargo clippy -p sqsafe-idempotency -p sqsafe -p charge-payment -p sqsafe-workspace-hack \
  --features sqsafe-idempotency/fault-injection,charge-payment/fault-injection --lib --bins \
  --example charge-payment-changes -- -D warnings

step "the bench smoke's binaries: naive-rust and sqsafe-bench (debug)"
cargo build -q -p charge-payment -p naive-rust -p sqsafe-bench --bins

step "cargo doc --workspace --no-deps, warnings denied"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "cargo test --workspace --no-run: every test binary built (they run in the steps below)"
cargo test --workspace --no-run
# What really linked (scripts/linker.sh): the linker a binary records in its .comment section.
echo "linker: $(readelf -p .comment "${ROOT}/target/debug/sqsafe" 2>/dev/null | grep -o 'Linker: .*' | cut -c1-40 || echo unknown)"

step "fault-injection suite: its functions built, then run in the background beside cargo test (output at the end)"
# The suite spends its minutes waiting on visibility timeouts, lease expiries and SIGKILLed functions: beside the test
# runs below it takes little more than alone. Figures and seed are printed when it ends (SQSAFE_FAULT_SEED=<n>
# replays, SQSAFE_FAULTS_HEAVY=1 for more). Its functions are built here with the fault-injection feature and copied
# into a folder of their own (SQSAFE_E2E_FAULT_BIN_DIR): cargo test then builds the plain ones under the same names,
# and the suite, which builds nothing, never runs those. The payments API's binary (sqsafe-payments, which one run
# kills in flight) is copied there too.
# The plain builds first, copied into a folder of their own too (SQSAFE_E2E_BIN_DIR): the tests that run the functions
# (sqsafe local up, the API under it, the trace logs) then build nothing. A cargo build inside a test took minutes
# (local_up 445 s, trace_logs 351 s, local_api 96 s in one fresh run; warm, local_up 170 s against 4 s without it).
cargo build -q -p charge-payment -p apply-ledger -p outbox-relay --bins
PLAIN_BINS="${ROOT}/target/e2e-bin-make-test"
mkdir -p "${PLAIN_BINS}"
cp "${ROOT}/target/debug/charge-payment" "${ROOT}/target/debug/apply-ledger" "${ROOT}/target/debug/outbox-relay" \
  "${PLAIN_BINS}/"
# With charge-payment's example charge-payment-changes: the same charge fed by a DynamoDB stream (the stream run's).
cargo build -q -p charge-payment -p apply-ledger --features charge-payment/fault-injection,apply-ledger/fault-injection \
  --bins --example charge-payment-changes
cargo build -q -p sqsafe-test-servers --bin sqsafe-payments
FAULT_BINS="${ROOT}/target/e2e-fault-bin-make-test"
mkdir -p "${FAULT_BINS}"
cp "${ROOT}/target/debug/charge-payment" "${ROOT}/target/debug/examples/charge-payment-changes" \
  "${ROOT}/target/debug/apply-ledger" "${ROOT}/target/debug/sqsafe-payments" "${FAULT_BINS}/"
# Its functions have 4 s to answer, and an answer after the deadline fails the run; the compiles beside it have time
# to spare. Where the suite runs as root (CI), the suite and every process it starts (its moto, the functions, the
# payments API) get the cores first: a niceness of -10, ahead of the release builds' -5. (CI once saw 137 invocations
# of one run time out while everything ran about 3x slower than usual; the same run alone, or beside six CPU-bound
# processes here, times none out.)
FAULT_NICE=()
if [[ "$(id -u)" == "0" ]]; then
  FAULT_NICE=(nice -n -10)
fi
# `--workspace --test faults`, not `-p sqsafe-e2e`: the test binary `cargo test --workspace --no-run` built, found
# fresh (with -p, cargo resolves sqsafe-e2e's workspace dependencies with other features and compiled five crates
# again, holding cargo's lock while the tests below waited on it).
background "the fault-injection suite" "${FAULT_NICE[@]}" env SQSAFE_E2E_FAULT_BIN_DIR="${FAULT_BINS}" \
  cargo test --workspace --test faults -- --nocapture --test-threads=1

step "bench smoke: started in the background beside cargo test (its output follows it)"
# The smoke waits on its own moto and the peers' pipelines; its binaries were built with the project check's.
background "the bench smoke" bash "${ROOT}/scripts/bench.sh" --smoke

step "the tests: cargo nextest run --workspace and the doc tests (all but the fault-injection suite; the cargo lambda watch test beside them)"
# tests/local_watch.rs waits minutes on queue timeouts and on cargo lambda watch's rebuilds, with its own moto and
# ports: it runs in the background beside the other tests.
LOCAL_WATCH_TEST="sqs_deliveries_through_cargo_lambda_watch_follow_saved_edits"
background "the cargo lambda watch test" env SQSAFE_E2E_SQSAFE_BIN="${INSTALLED_BIN}/sqsafe" \
  cargo test --workspace --test local_watch -- --exact "${LOCAL_WATCH_TEST}"
# The tests mostly wait (moto's answers, queue timeouts, function processes): scripts/run-tests.py runs them with
# cargo-nextest (in the machine's image), four at a time whatever binary they are in, each in a process of its own,
# then the doc tests (without nextest: cargo test, one binary after another, as before). The same tests,
# the same skips (measured on the warm tree: see book/src/development.md, "Where make test's time goes").
# The tests that run charge-payment, apply-ledger or sqsafe run those built above (SQSAFE_E2E_BIN_DIR,
# SQSAFE_E2E_SQSAFE_BIN) instead of calling cargo build for them.
SQSAFE_E2E_BIN_DIR="${PLAIN_BINS}" SQSAFE_E2E_SQSAFE_BIN="${INSTALLED_BIN}/sqsafe" \
  "${ROOT}/.venv/bin/python" "${ROOT}/scripts/run-tests.py" --workspace
report_background "the cargo lambda watch test" "the other tests"

step "the template rules' mutation corpus against sqsafe check (test_rules.py, test_nested.py), the project template"
# Every mutation of template.yaml and of a nested child must fail its rule in sqsafe check, and the project template's
# consumer must be the one sqsafe new consumer makes (test_project_template.py: the same files); run here, with sqsafe
# built and no cargo step rebuilding it (the template checks in the background leave these files to this step).
SQSAFE_BIN="${ROOT}/target/debug/sqsafe" "${ROOT}/.venv/bin/python" -m pytest -q tests/template/test_rules.py \
  tests/template/test_nested.py tests/template/test_project_template.py

step "template checks: their output (sam validate, cfn-lint, sam build, rules, smoke deploy; running since moto started)"
report_background "the template checks" "the steps above"

step "a new project outside the workspace: its output (it ran in the background since moto started)"
report_background "the project check" "the steps above"

step "release binary size: the project's sam build against ChargePaymentFunction's (within 10%)"
# Both bootstraps are built by now: the workspace's by the template checks, the project's by the project check.
"${ROOT}/.venv/bin/python" "${ROOT}/scripts/size-check.py" --built

step "bench smoke: its output (every peer and figure, a few batches; request counts, no timings)"
report_background "the bench smoke" "cargo test and the fault-injection suite"

step "fault-injection suite: its output (it ran in the background since the step of that name)"
report_background "the fault-injection suite" "the steps above"

step "the book: its output (mdBook build, link check; it ran in the background since the template checks started)"
report_background "the book" "the steps above"

step "cargo package: its output (it ran in the background since the step of that name)"
report_background "cargo package" "the steps above"

step "all steps passed"
SUITE_PASSED=1
timings
