#!/bin/sh
# Links with mold when it is installed (much faster incremental links), with the system default otherwise.
# Debug sections are compressed (zlib): backtraces keep their file:line, and each test binary is about 6 MB smaller
# (make test links about 70 of them: the disk of a CI machine is small).
if command -v mold >/dev/null 2>&1; then
  exec cc -fuse-ld=mold -Wl,--compress-debug-sections=zlib "$@"
fi
exec cc -Wl,--compress-debug-sections=zlib "$@"
