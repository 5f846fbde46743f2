#!/usr/bin/env bash
# Creates .venv-bench (the Powertools peer and matplotlib, bench/requirements.txt) apart from the test venv, with the
# test venv's pinned uv (sqsafe local venv installs it: run that first, as scripts/bench.sh does).
# Reinstalls only when the requirements (or the Python version) change, tracked by a hash stamp inside the venv:
# the first install takes ~10-30 s, a no-op a few milliseconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROOT}/.venv-bench"
STAMP="${VENV}/.requirements.sha256"
PYTHON="${PYTHON:-python3}"
REQS=("${ROOT}/bench/requirements.txt" "${ROOT}/bench/peers/powertools/requirements.txt")

py_version="$("${PYTHON}" -c 'import sys; print(sys.version.split()[0])')"
want="$( { cat "${REQS[@]}"; echo "python=${py_version}"; } | sha256sum | cut -d' ' -f1)"
if [[ -x "${VENV}/bin/python" && -f "${STAMP}" && "$(cat "${STAMP}")" == "${want}" ]] \
  && "${VENV}/bin/python" -c '' 2>/dev/null; then
  exit 0
fi

echo "bench-venv.sh: creating ${VENV} (Python ${py_version})"
rm -rf "${VENV}"
start="${SECONDS}"
"${PYTHON}" -m venv "${VENV}"
UV="${ROOT}/.venv/bin/uv"
[[ -x "${UV}" ]] || { echo "bench-venv.sh: ${UV} not found: run make venv (sqsafe local venv) first" >&2; exit 1; }
UV_LINK_MODE=copy "${UV}" pip install --quiet --python "${VENV}/bin/python" -r "${REQS[0]}"
echo "${want}" > "${STAMP}"
echo "bench-venv.sh: done in $((SECONDS - start)) s"
