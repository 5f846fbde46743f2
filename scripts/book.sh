#!/usr/bin/env bash
# The book (book/src): installs the pinned mdBook once, builds the book into book/book/, and checks the links of the
# book and of README.md (scripts/book-check.py, after its self-test). `make book`; `make test` runs it in the background.
#
# mdBook is installed with cargo from crates.io into .tools/mdbook (ignored by git), without its default features
# (serve, watch, search: a static build needs none of them), and only when .tools/mdbook/bin/mdbook is not already the
# pinned version. It compiles in target/mdbook-install, removed once installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

MDBOOK_VERSION="0.5.4"
# A debug build: installing it took 88 s and 115 s of CPU (user + sys, two runs), a release build 210 s (measured
# 2026-12-01 with -j 1 beside other builds, so the wall times, 27 to 56 minutes, say nothing). The debug binary
# builds this book in 0.5 s, the release one in 0.1 s: not worth twice the CPU on a fresh clone's make test.
MDBOOK_PROFILE=(--debug)
TOOLS="${ROOT}/.tools/mdbook"
MDBOOK="${TOOLS}/bin/mdbook"

if [[ "$("${MDBOOK}" --version 2>/dev/null || true)" != "mdbook v${MDBOOK_VERSION}" ]]; then
  echo "==> installing mdbook ${MDBOOK_VERSION} into .tools/mdbook (once: a few minutes on 2 cores)"
  started="$(date +%s)"
  CARGO_TARGET_DIR="${ROOT}/target/mdbook-install" cargo install mdbook --locked --version "${MDBOOK_VERSION}" \
    --no-default-features "${MDBOOK_PROFILE[@]}" --root "${TOOLS}" --force --quiet
  rm -rf "${ROOT}/target/mdbook-install"
  echo "mdbook ${MDBOOK_VERSION} installed in $(($(date +%s) - started)) s"
fi

echo "==> book-check --self-test (the link check must catch each kind of break)"
python3 "${ROOT}/scripts/book-check.py" --self-test

echo "==> mdbook build book (into book/book/)"
"${MDBOOK}" build "${ROOT}/book"

echo "==> book-check: README.md and book/src, anchors also against the built pages"
python3 "${ROOT}/scripts/book-check.py" --html "${ROOT}/book/book"
