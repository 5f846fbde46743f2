#!/bin/sh
# The linker rustc calls for x86_64 Linux (.cargo/config.toml). rustc (1.90 and later) passes its own rust-lld here
# (`-B<sysroot>/gcc-ld -fuse-ld=lld`): that is what links, whatever else is installed (a `-fuse-ld=mold` placed before
# rustc's arguments is overridden by them; `make test` prints the linker recorded in a binary it built).
# Debug sections are compressed (zlib): backtraces keep their file:line, and each test binary is about 6 MB smaller
# (make test links about 70 of them: the disk of a CI machine is small).
# SQSAFE_LINK_TIMES=FILE appends each link's seconds and output to FILE (scripts/timings.py reads it); the variable
# is not in cargo's fingerprint, so setting it rebuilds nothing.
if [ -z "${SQSAFE_LINK_TIMES:-}" ]; then
  exec cc -Wl,--compress-debug-sections=zlib "$@"
fi
started=$(date +%s%N)
cc -Wl,--compress-debug-sections=zlib "$@"
rc=$?
out=""
previous=""
for arg in "$@"; do
  [ "${previous}" = "-o" ] && out="${arg}"
  previous="${arg}"
done
echo "$(( ($(date +%s%N) - started) / 1000000 )) ms ${out}" >>"${SQSAFE_LINK_TIMES}"
exit "${rc}"
