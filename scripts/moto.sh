#!/usr/bin/env bash
# Runs moto server (the local AWS) from .venv, on 127.0.0.1 only, through crates/sqsafe-local/src/moto_server.py: moto_server with
# DynamoDB's writes applied one at a time, so that a conditional write is atomic as it is on DynamoDB.
#
#   scripts/moto.sh start    start in the background on a free loopback port, wait until it answers;
#                            pid, port and log go to .run/ (moto.pid, moto.port, moto.log).
#                            If one is already running from .run/, it is reused.
#   scripts/moto.sh stop     stop the background server (no-op when none is running)
#   scripts/moto.sh status   print the endpoint and exit 0 when running, exit 1 otherwise
#   scripts/moto.sh run      run in the foreground (Ctrl-C stops it), printing the env to export;
#                            MOTO_PORT=N picks the port (default: a free one)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROOT}/.venv"
RUN_DIR="${ROOT}/.run"
PID_FILE="${RUN_DIR}/moto.pid"
PORT_FILE="${RUN_DIR}/moto.port"
LOG_FILE="${RUN_DIR}/moto.log"
# The launcher sqsafe-local embeds (sqsafe local up | moto): one file for both.
LAUNCHER="${ROOT}/crates/sqsafe-local/src/moto_server.py"
HOST="127.0.0.1"
READY_TIMEOUT="${MOTO_READY_TIMEOUT:-15}"

die() {
  echo "moto.sh: $*" >&2
  exit 1
}

need_venv() {
  [[ -x "${VENV}/bin/moto_server" ]] || die "${VENV}/bin/moto_server not found: run scripts/venv.sh first"
}

free_port() {
  "${VENV}/bin/python" -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# Polls POST /moto-api/reset until it answers 200, the process dies, or the timeout passes.
# Exit status: 0 ready, 1 timeout, 2 process died.
wait_ready() {
  local pid="$1" port="$2"
  "${VENV}/bin/python" - "${pid}" "${port}" "${READY_TIMEOUT}" <<'PY'
import os, sys, time, urllib.request
pid, port, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
url = f"http://127.0.0.1:{port}/moto-api/reset"
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(2)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
sys.exit(1)
PY
}

# True when the pid file names a live moto_server process.
is_running() {
  [[ -f "${PID_FILE}" ]] || return 1
  local pid
  pid="$(cat "${PID_FILE}")"
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  kill -0 "${pid}" 2>/dev/null || return 1
  # Guard against a recycled pid: the process must be moto_server (or its launcher, moto_server.py).
  tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -q moto_server
}

print_endpoint() {
  echo "moto: http://${HOST}:$(cat "${PORT_FILE}") (pid $(cat "${PID_FILE}"), log ${LOG_FILE#"${ROOT}/"})"
}

cmd_start() {
  need_venv
  mkdir -p "${RUN_DIR}"
  if is_running && [[ -f "${PORT_FILE}" ]]; then
    echo "moto.sh: already running"
    print_endpoint
    return 0
  fi
  rm -f "${PID_FILE}" "${PORT_FILE}"

  local attempt port pid rc
  # A few attempts: another process may grab the chosen free port before moto binds it.
  for attempt in 1 2 3; do
    port="$(free_port)"
    : > "${LOG_FILE}"
    # setsid: own session, so Ctrl-C in the calling terminal does not reach it and it outlives this script.
    setsid "${VENV}/bin/python" "${LAUNCHER}" -H "${HOST}" -p "${port}" >> "${LOG_FILE}" 2>&1 < /dev/null &
    pid=$!
    echo "${pid}" > "${PID_FILE}"
    echo "${port}" > "${PORT_FILE}"
    rc=0
    wait_ready "${pid}" "${port}" || rc=$?
    if [[ "${rc}" -eq 0 ]]; then
      print_endpoint
      return 0
    fi
    if [[ "${rc}" -eq 2 && "${attempt}" -lt 3 ]]; then
      echo "moto.sh: moto_server exited at once on port ${port}, retrying" >&2
      continue
    fi
    break
  done

  if [[ "${rc}" -eq 2 ]]; then
    echo "moto.sh: moto_server (pid ${pid}) exited before answering on port ${port}" >&2
  else
    echo "moto.sh: moto_server (pid ${pid}) not ready on port ${port} after ${READY_TIMEOUT} s" >&2
  fi
  echo "---- tail of ${LOG_FILE} ----" >&2
  tail -n 40 "${LOG_FILE}" >&2 || true
  echo "-----------------------------" >&2
  cmd_stop >/dev/null 2>&1 || true
  exit 1
}

cmd_stop() {
  if ! is_running; then
    rm -f "${PID_FILE}" "${PORT_FILE}"
    echo "moto.sh: not running"
    return 0
  fi
  local pid i
  pid="$(cat "${PID_FILE}")"
  kill "${pid}" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pid}" 2>/dev/null; then
    echo "moto.sh: pid ${pid} did not stop on SIGTERM, sending SIGKILL" >&2
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${PID_FILE}" "${PORT_FILE}"
  echo "moto.sh: stopped (pid ${pid})"
}

cmd_status() {
  if is_running && [[ -f "${PORT_FILE}" ]]; then
    print_endpoint
    return 0
  fi
  echo "moto.sh: not running"
  return 1
}

cmd_run() {
  need_venv
  local port="${MOTO_PORT:-}"
  [[ -n "${port}" ]] || port="$(free_port)"
  # shellcheck source=scripts/aws-env.sh
  source "${ROOT}/scripts/aws-env.sh"
  cat <<MSG
moto server on http://${HOST}:${port} (foreground, Ctrl-C to stop). In another shell:

$(aws_env_exports "${port}")

MSG
  exec "${VENV}/bin/python" "${LAUNCHER}" -H "${HOST}" -p "${port}"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  run) cmd_run ;;
  *)
    echo "usage: $0 start|stop|status|run" >&2
    exit 2
    ;;
esac
