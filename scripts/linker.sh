#!/bin/sh
# Links with mold when it is installed (much faster incremental links), with the system default otherwise.
if command -v mold >/dev/null 2>&1; then
  exec cc -fuse-ld=mold "$@"
fi
exec cc "$@"
