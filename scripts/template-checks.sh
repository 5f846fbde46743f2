#!/usr/bin/env bash
# Checks template.yaml offline, in the order a mistake is cheapest to find:
#   1. sam validate --lint           (cfn-lint on the SAM template)
#   2. sam validate                  (the SAM translator's own validation; region set, no credentials)
#   3. SAM transform + cfn-lint      (cfn-lint on the translated CloudFormation: errors inside
#                                     AWS::Serverless::Function that 1 misses)
#   4. sam build                     (every function, with the pinned cargo-lambda from .venv)
#   5. pytest tests/template         (the rules, the structure moto cannot create, the smoke deploy into moto)
# Each catches errors the others miss: cfn-lint alone no longer runs the SAM transform, so it misses mistakes inside
# AWS::Serverless::Function (a bad Runtime, a misspelt ReportBatchItemFailures) that 2 and 3 catch.
#
# Expects what scripts/test.sh sets up: the venv (.venv) and moto server with AWS_ENDPOINT_URL etc. exported
# (sqsafe local moto). By hand: `make venv`, then `target/debug/sqsafe local moto -- bash scripts/template-checks.sh`.
#
# Build architecture: the template deploys arm64. scripts/build_arch.py decides it, once for the whole of make test
# (scripts/test.sh exports SQSAFE_BUILD_ARCH, with SQSAFE_BUILD_ARCH_REASON): arm64 where the aarch64 Rust std is
# installed or rustup adds it, else x86_64 (parameter Architecture=x86_64, for this build only), and says why. Run by
# hand without SQSAFE_BUILD_ARCH, this script decides by the same rule. `--print-arch` prints the architecture it
# would build for and exits (scripts/build_arch.py --check).
#
# SQSAFE_TEMPLATE=/path/to/project/template.yaml checks another project's template instead (a project made from
# templates/project, scripts/project-check.py): 1-3 only, no build, no smoke deploy (project-check.py runs the rules,
# the project's own `sqsafe check`), no pytest (the pytest files are this repository's own template's tests). Outputs stay in .aws-sam/ (ignored by git); cargo-lambda builds in
# target/<triple>/release and target/lambda/, apart from the dev build in target/debug.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
if [[ "${1:-}" == "--print-arch" ]]; then
  exec python3 "${ROOT}/scripts/build_arch.py" --current
fi
VENV="${ROOT}/.venv"
OUT="${ROOT}/.aws-sam"
TEMPLATE="${SQSAFE_TEMPLATE:-template.yaml}"
REGION="us-east-1"

die() {
  echo "template-checks.sh: $*" >&2
  exit 1
}

step() {
  printf '\n--> %s\n' "$*"
}

TIMINGS=()
# timed LABEL CMD...: runs CMD, records how long it took.
timed() {
  local label="$1" start rc=0
  shift
  start="$(date +%s.%N)"
  "$@" || rc=$?
  local took
  took="$(awk -v a="${start}" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  TIMINGS+=("$(printf '%-34s %7s s' "${label}" "${took}")")
  if [[ "${rc}" -ne 0 ]]; then
    echo "template-checks.sh: FAILED: ${label} (exit ${rc}, after ${took} s)" >&2
    exit "${rc}"
  fi
  echo "(${label}: ${took} s)"
}

# ---------------------------------------------------------------- preconditions
[[ -x "${VENV}/bin/sam" && -x "${VENV}/bin/cfn-lint" && -x "${VENV}/bin/cargo-lambda" ]] \
  || die "${VENV} lacks sam, cfn-lint or cargo-lambda: run make venv (sqsafe local venv)"
[[ -n "${AWS_ENDPOINT_URL:-}" ]] \
  || die "AWS_ENDPOINT_URL is not set: run from scripts/test.sh, or under target/debug/sqsafe local moto -- bash scripts/template-checks.sh"
case "${AWS_ENDPOINT_URL}" in
  http://127.0.0.1:* | http://localhost:*) ;;
  *) die "AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL} is not loopback: refusing to run" ;;
esac

# The pinned tools first (cargo-lambda, sam, cfn-lint); never the real AWS.
export PATH="${VENV}/bin:${PATH}"
export AWS_EC2_METADATA_DISABLED=true
# SAM CLI: no telemetry and no weekly version check (it calls pypi.org); its state lives under .aws-sam/.
export SAM_CLI_TELEMETRY=0
export __SAM_CLI_APP_DIR="${OUT}/sam-cli-home"
mkdir -p "${__SAM_CLI_APP_DIR}" "${OUT}/checks"
printf '{"telemetryEnabled": false, "lastVersionCheck": %s}\n' "$(date +%s)" > "${__SAM_CLI_APP_DIR}/metadata.json"

# ---------------------------------------------------------------- 1. sam validate --lint
step "sam validate --lint"
timed "sam validate --lint" sam validate --lint --template-file "${TEMPLATE}"

# ---------------------------------------------------------------- 2. sam validate (region, no credentials)
step "sam validate (AWS_DEFAULT_REGION=${REGION}, no credentials)"
timed "sam validate" env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
  AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_CONFIG_FILE=/dev/null AWS_DEFAULT_REGION="${REGION}" \
  sam validate --template-file "${TEMPLATE}"

# ---------------------------------------------------------------- 3. translate + cfn-lint
step "SAM transform (aws-sam-translator) + cfn-lint on the result"
TRANSLATED="${OUT}/checks/translated.json"
if [[ -n "${SQSAFE_TEMPLATE:-}" ]]; then
  TRANSLATED="${OUT}/checks/translated-$(basename "$(dirname "${TEMPLATE}")").json"
fi
# A nested application's local template (sqsafe/consumer.yaml) is plain CloudFormation: cfn-lint checks it on its own.
translate_and_lint() {
  local children
  python tests/template/sam_translate.py --template "${TEMPLATE}" --region "${REGION}" --out "${TRANSLATED}" \
    && cfn-lint --regions "${REGION}" -- "${TRANSLATED}" \
    && echo "cfn-lint: ${TRANSLATED#"${ROOT}/"} clean" \
    && children="$(python tests/template/sam_translate.py --template "${TEMPLATE}" --list-children)" \
    || return 1
  if [[ -n "${children}" ]]; then
    mapfile -t children <<< "${children}"
    cfn-lint --regions "${REGION}" -- "${children[@]}" && echo "cfn-lint: ${children[*]} clean"
  fi
}
timed "translate + cfn-lint" translate_and_lint

if [[ -n "${SQSAFE_TEMPLATE:-}" ]]; then
  printf '\n--> template checks passed (%s)\n' "${TEMPLATE}"
  printf '    %s\n' "${TIMINGS[@]}"
  exit 0
fi

# ---------------------------------------------------------------- 4. sam build
if [[ -n "${SQSAFE_BUILD_ARCH:-}" ]]; then
  arch="$(python3 "${ROOT}/scripts/build_arch.py" --current)"
  reason="${SQSAFE_BUILD_ARCH_REASON:-forced by SQSAFE_BUILD_ARCH=${arch}}"
else
  IFS=$'\t' read -r arch reason < <(python3 "${ROOT}/scripts/build_arch.py" --decide)
fi
[[ "${arch}" == arm64 || "${arch}" == x86_64 ]] || die "no build architecture decided (scripts/build_arch.py)"
rm -f "${OUT}/sqsafe-build.json"
step "sam build: ${arch} (${reason})"
timed "sam build (${arch})" sam build --template-file "${TEMPLATE}" --parameter-overrides "Architecture=${arch}"
printf '{"architecture": "%s", "reason": "%s"}\n' "${arch}" "${reason}" > "${OUT}/sqsafe-build.json"
for f in "${OUT}"/build/*/bootstrap; do
  echo "built: ${f#"${ROOT}/"} ($(du -h "${f}" | cut -f1), $(file -b "${f}" 2>/dev/null | cut -d, -f1-2 || echo "${arch}"))"
done
if [[ "${arch}" != "arm64" ]]; then
  echo "NOTE: built ${arch}, not arm64: ${reason}"
fi

# ---------------------------------------------------------------- 5. pytest
step "pytest tests/template (rules, structure, smoke deploy into moto at ${AWS_ENDPOINT_URL})"
# The tests that run the sqsafe binary (test_rules.py, test_nested.py: the rules are sqsafe check's; and
# test_project_template.py) need one that no cargo step is rebuilding: make test runs these in the background beside
# its cargo steps, so it sets SQSAFE_RUST_RULES_LATER=1 and runs those three files itself once its builds are done.
later=()
if [[ "${SQSAFE_RUST_RULES_LATER:-}" == "1" ]]; then
  later=(--ignore=tests/template/test_rules.py --ignore=tests/template/test_nested.py
    --ignore=tests/template/test_project_template.py)
  echo "test_rules.py, test_nested.py and test_project_template.py: run by make test after its cargo builds"
fi
timed "pytest tests/template" python -m pytest tests/template --durations=3 "${later[@]}"

printf '\n--> template checks passed\n'
printf '    %s\n' "${TIMINGS[@]}"
