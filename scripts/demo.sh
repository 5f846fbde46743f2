#!/usr/bin/env bash
# Runs the idempotency demo against a local moto server (started here, stopped on exit).
# Extra arguments are passed to the example.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=scripts/aws-env.sh
source "${ROOT}/scripts/aws-env.sh"

bash "${ROOT}/scripts/venv.sh"
moto_up "${ROOT}"
echo "AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL}"

cargo run -q -p sqsafe-idempotency --example demo -- "$@"
