#!/usr/bin/env bash
# charge-payment at two commits, side by side: its claim and keyed modes measured base, head, head, base, ... on the
# bench's local AWS (moto behind the bench proxy, under sqsafe-local's Runtime API), then counted under callgrind.
# One bench run on a shared machine says little; interleaved runs say more, and instruction counts say it exactly.
#
#   scripts/bench-compare.sh BASE [HEAD] [options]
#
#   BASE, HEAD     commits (anything `git rev-parse` reads). HEAD defaults to the working tree as it is, uncommitted
#                  changes included (a fix under test); pass HEAD (the word) for the commit.
#   --pairs N      base/head pairs of runs (default 4); each run is a process with its own moto, proxy and payments API;
#                  base runs first in odd pairs and head in even ones, so a load that drifts through the run weighs on
#                  both sides alike
#   --base-first   base then head in every pair instead (the order issue 48's runs used: a rising load lands on head)
#   --batches N    fresh batches of 10 per mode and run, on a warm process (default 80)
#   --cold-starts N  cold starts per mode and run; the first answer is their median (default 3)
#   --network NET  BACKEND-MS: moto-5 (default: moto behind the proxy's 5 ms per request), moto-0, canned-0, canned-5
#   --no-instructions  skip the callgrind counts (about two minutes)
#   --md FILE      the results file the summary is appended to (default bench/COMPARE.md; '' for none)
#
# Each commit's release charge-payment is built alone (`cargo build --release -p charge-payment`, so no other
# package's features reach it), with symbols (for callgrind), in a worktree of that commit with its own target folder:
# target/bench-compare/<sha>/{target,bin}; a second run reuses bin/charge-payment. The working tree builds in
# target/bench-compare/worktree (cargo decides what is stale). The driver (crates/sqsafe-bench) is the working
# tree's, built in release in target/bench-compare/worktree/target beside the working tree's charge-payment.
#
# Output, on stdout (also kept as summary.txt) and appended to bench/COMPARE.md: per mode and pair, base -> head
# (change) of CPU per fresh message (us; then its user and system parts), the median wall time of a batch of 10 (ms)
# and the first answer (ms), with the load average when each run started; per side the median and min-max over the
# pairs; a verdict (head's median within, above or below base's min-max); instructions per fresh message per mode and
# network; and the functions whose instructions per message differ most (exclusive and inclusive, on the canned
# backend). Each run's JSON, the callgrind dumps and compare.json (the summary's figures, every network's function
# differences) stay in target/bench-compare/runs/<time>-<base>-<head>/; `sqsafe-bench --summary-only` with the same
# --compare-base/--compare-head and --out in that folder prints its summary again.
#
# The base's label: the commit and its subject. The head's, for the working tree: "working tree on <commit>", and the
# changed sources charge-payment may build from, if any.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

usage() {
  sed -n '5,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
base=""
head=""
pairs=4
batches=80
cold_starts=3
network=moto-5
instructions=1
base_first=0
md=bench/COMPARE.md
while (($#)); do
  case "$1" in
    --pairs) pairs="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --cold-starts) cold_starts="$2"; shift 2 ;;
    --network) network="$2"; shift 2 ;;
    --no-instructions) instructions=0; shift ;;
    --base-first) base_first=1; shift ;;
    --md) md="$2"; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *)
      if [[ -z "${base}" ]]; then base="$1"; elif [[ -z "${head}" ]]; then head="$1"; else usage; fi
      shift
      ;;
  esac
done
[[ -n "${base}" ]] || usage
step() { printf '\n==> %s\n' "$*" >&2; }
started="${SECONDS}"
export CARGO_INCREMENTAL=0
store="${ROOT}/target/bench-compare"
mkdir -p "${store}"

# release_build CHECKOUT DIR: charge-payment built alone in CHECKOUT, with symbols, into DIR/target, copied to DIR/bin.
release_build() {
  (
    cd "$1"
    CARGO_PROFILE_RELEASE_STRIP=none CARGO_TARGET_DIR="$2/target" \
      cargo build --release --locked -p charge-payment --bin charge-payment >&2
  )
  mkdir -p "$2/bin"
  cp "$2/target/release/charge-payment" "$2/bin/charge-payment"
}

# build_commit REV: prints the folder holding that commit's charge-payment, building it first unless cached.
build_commit() {
  local sha dir wt
  sha="$(git rev-parse --verify "$1^{commit}")"
  dir="${store}/${sha}"
  if [[ -x "${dir}/bin/charge-payment" ]]; then
    step "${sha:0:7}: charge-payment cached (${dir}/bin)"
    echo "${dir}/bin"
    return
  fi
  wt="/tmp/wt-bench-${sha:0:12}"
  if [[ ! -d "${wt}" ]]; then
    git worktree add --detach "${wt}" "${sha}" >&2
  fi
  step "${sha:0:7}: release charge-payment, alone, in ${wt} (target ${dir}/target)"
  release_build "${wt}" "${dir}"
  git worktree remove --force "${wt}" >&2
  echo "${dir}/bin"
}

# build_worktree: the same for the working tree as it is (cargo decides what is stale).
build_worktree() {
  step "working tree: release charge-payment, alone (target ${store}/worktree/target)"
  release_build "${ROOT}" "${store}/worktree"
  echo "${store}/worktree/bin"
}

label() {
  local sha subject
  sha="$(git rev-parse --verify "$1^{commit}")"
  subject="$(git log -1 --format=%s "${sha}")"
  if ((${#subject} > 60)); then
    subject="${subject:0:60}…"
  fi
  echo "${sha:0:7} (${subject})"
}

base_bins="$(build_commit "${base}")"
base_label="$(label "${base}")"
if [[ -z "${head}" ]]; then
  head_bins="$(build_worktree)"
  head_label="working tree on $(label HEAD)"
  # What charge-payment may build from: changed sources of the crates and functions (the bench's own aside).
  changed="$(git diff --name-only HEAD -- crates functions Cargo.toml Cargo.lock ':!crates/sqsafe-bench' |
    grep -v '/tests/' || true)"
  if [[ -n "${changed}" ]]; then
    head_label="${head_label}, with uncommitted changes to $(echo "${changed}" | head -5 | paste -sd, -)"
  fi
  head_name=worktree
else
  head_bins="$(build_commit "${head}")"
  head_label="$(label "${head}")"
  head_name="$(git rev-parse --short "${head}^{commit}")"
fi

# In the working tree's target folder: the workspace hack gives every member the same dependency features, so the
# working tree's charge-payment and the driver share their dependencies' builds (each `cargo build` still resolves its
# own package's features: charge-payment is built alone all the same).
step "the driver (crates/sqsafe-bench, release, target ${store}/worktree/target)"
CARGO_PROFILE_RELEASE_STRIP=none CARGO_TARGET_DIR="${store}/worktree/target" \
  cargo build -q --release --locked -p sqsafe-bench --bin sqsafe-bench
driver="${store}/worktree/target/release/sqsafe-bench"

step "venv: .venv (moto server)"
cargo build -q -p sqsafe-cli --bin sqsafe
target/debug/sqsafe local venv

out="${store}/runs/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short "${base}^{commit}")-${head_name}"
mkdir -p "${out}"
step "${pairs} pairs of runs; results in ${out}"
args=(
  --compare-base "${base_bins}" --compare-head "${head_bins}"
  --base-label "${base_label}" --head-label "${head_label}"
  --pairs "${pairs}" --batches "${batches}" --cold-starts "${cold_starts}" --network "${network}"
  --out "${out}/compare.json"
)
if [[ -n "${md}" ]]; then
  args+=(--md "${md}")
else
  args+=(--no-md)
fi
if [[ "${instructions}" == 0 ]]; then
  args+=(--no-instructions)
fi
if [[ "${base_first}" == 1 ]]; then
  args+=(--base-first)
fi
"${driver}" "${args[@]}" | tee "${out}/summary.txt"
echo "bench-compare done in $((SECONDS - started)) s" >&2
