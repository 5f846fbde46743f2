#!/usr/bin/env bash
# make local / make local-watch: `sqsafe local up [ARGS]` with this repository's fake payments API as charge-payment's
# PaymentsApiUrl. sqsafe knows no payments API (it would give PaymentsApiUrl a generic stand-in, whose answers
# charge-payment cannot read): the payments API is sqsafe-payments, of crates/sqsafe-test-servers, run here on a free
# loopback port for as long as `up` runs. It honours Idempotency-Key through sqsafe's layer with its keys in its own
# memory: it starts before `up`'s moto exists (`up` needs its URL), and the keys live as long as moto's tables do. Ctrl-C or SIGTERM (to this script, or to make, which passes it on) stops
# `up`, then the payments API, which prints its counters. `--parameter PaymentsApiUrl=URL` in ARGS points
# charge-payment elsewhere (the later value wins).
#
#   scripts/local.sh [ARGS of sqsafe local up]   (make builds target/debug/sqsafe and sqsafe-payments first)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SQSAFE="${ROOT}/target/debug/sqsafe"
PAYMENTS="${ROOT}/target/debug/sqsafe-payments"
for bin in "${SQSAFE}" "${PAYMENTS}"; do
  [[ -x "${bin}" ]] || { echo "local.sh: ${bin} is missing: make local builds it" >&2; exit 1; }
done

payments_log="$(mktemp -t sqsafe-payments.XXXXXX)"
payments_pid=""
up_pid=""

stop_payments() {
  if [[ -n "${payments_pid}" ]] && kill -0 "${payments_pid}" 2>/dev/null; then
    kill -TERM "${payments_pid}" 2>/dev/null || true
    wait "${payments_pid}" 2>/dev/null || true
  fi
  # Its counters ("stats: ..."), or why it did not start.
  sed -n 's/^stats: /payments API: /p' "${payments_log}"
  rm -f "${payments_log}"
}
trap stop_payments EXIT
# Passed on to `up`, which stops everything it started; this script then returns when `up` has.
trap '[[ -n "${up_pid}" ]] && kill -TERM "${up_pid}" 2>/dev/null' INT TERM

"${PAYMENTS}" >"${payments_log}" 2>&1 &
payments_pid=$!
url=""
for _ in $(seq 100); do
  url="$(sed -n 's/^payments API listening on \(http:[^ ]*\).*/\1/p' "${payments_log}")"
  [[ -n "${url}" ]] && break
  kill -0 "${payments_pid}" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "${url}" ]]; then
  echo "local.sh: sqsafe-payments did not start:" >&2
  cat "${payments_log}" >&2
  exit 1
fi
echo "payments API     ${url}  (sqsafe-payments, crates/sqsafe-test-servers: PaymentsApiUrl)"

# In the background so that a signal reaches the trap above while `up` runs (bash runs a trap only between commands).
"${SQSAFE}" local up --parameter "PaymentsApiUrl=${url}" "$@" &
up_pid=$!
status=0
# `wait` returns early (above 128) when a trapped signal arrives; wait again until `up` has really ended.
while true; do
  wait "${up_pid}" && status=0 || status=$?
  kill -0 "${up_pid}" 2>/dev/null || break
done
exit "${status}"
