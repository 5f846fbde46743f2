#!/usr/bin/env bash
# Creates .venv (python3 -m venv) and installs requirements/test.txt into it: pip installs the pinned uv
# (requirements/uv.txt, one wheel), uv the rest (parallel downloads, no bytecode compiled ahead: Python compiles
# each module on its first import instead).
# Idempotent: reinstalls only when a requirements file (or the Python version) changed,
# tracked by a hash stamp inside .venv. A no-op takes a few milliseconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROOT}/.venv"
REQ="${ROOT}/requirements/test.txt"
UV_REQ="${ROOT}/requirements/uv.txt"
STAMP="${VENV}/.requirements.sha256"
PYTHON="${PYTHON:-python3}"

for file in "${REQ}" "${UV_REQ}"; do
  if [[ ! -f "${file}" ]]; then
    echo "venv.sh: missing ${file}" >&2
    exit 1
  fi
done

py_version="$("${PYTHON}" -c 'import sys; print(sys.version.split()[0])')"
want="$( { cat "${REQ}" "${UV_REQ}"; echo "python=${py_version}"; } | sha256sum | cut -d' ' -f1)"

# Fast path: venv works and the stamp matches.
if [[ -x "${VENV}/bin/python" && -f "${STAMP}" ]] \
  && [[ "$(cat "${STAMP}")" == "${want}" ]] \
  && "${VENV}/bin/python" -c '' 2>/dev/null; then
  exit 0
fi

# (Re)create the venv when it is missing, broken, or built by another Python version.
if [[ -x "${VENV}/bin/python" ]] && "${VENV}/bin/python" -c '' 2>/dev/null; then
  have_version="$("${VENV}/bin/python" -c 'import sys; print(sys.version.split()[0])')"
else
  have_version=""
fi
if [[ "${have_version}" != "${py_version}" ]]; then
  echo "venv.sh: creating ${VENV} (Python ${py_version})"
  rm -rf "${VENV}"
  "${PYTHON}" -m venv "${VENV}"
fi

echo "venv.sh: installing ${REQ#"${ROOT}/"} into .venv"
rm -f "${STAMP}"
start="${SECONDS}"
"${VENV}/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "${UV_REQ}"
# UV_LINK_MODE=copy: uv's cache and the venv may be on different filesystems (no hard links; no warning).
UV_LINK_MODE=copy "${VENV}/bin/uv" pip install --quiet --python "${VENV}/bin/python" -r "${REQ}"
echo "${want}" > "${STAMP}"
echo "venv.sh: done in $((SECONDS - start)) s"
