#!/bin/sh
# The linker rustc calls for x86_64 Linux (.cargo/config.toml). rustc (1.90 and later) passes its own rust-lld here
# (`-B<sysroot>/gcc-ld -fuse-ld=lld`): that is what links, whatever else is installed (a `-fuse-ld=mold` placed before
# rustc's arguments is overridden by them; `make test` prints the linker recorded in a binary it built).
# Debug sections are compressed (zlib): backtraces keep their file:line, and each test binary is about 6 MB smaller
# (make test links about 70 of them: the disk of a CI machine is small).
exec cc -Wl,--compress-debug-sections=zlib "$@"
