#!/usr/bin/env bash
# bench/build-floor.sh OUT_DIR — builds the Swift-runtime floor library (bench/floor/floor.swift)
# the way the Makefile builds libportal-keyring.so: swiftc -O -static-stdlib, lld, --gc-sections,
# -z defs, an export list of its one function, `strip --strip-unneeded`. Writes
# OUT_DIR/libbench-floor.so (stripped) and OUT_DIR/libbench-floor.unstripped.so, and prints the
# stripped path. The same link flags as the shipped library are read from the Makefile's
# LIB_LINK_FLAGS through `make -s print-lib-link-flags`, so a flag tried there is tried here too.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/build-floor.sh OUT_DIR}
mkdir -p "$out"
command -v swiftc >/dev/null || export PATH=/opt/swift/usr/bin:$PATH
map=$out/floor.map
printf '{ global: bench_floor_call; local: *; };\n' >"$map"
read -r -a extra <<<"$(make -s print-floor-link-flags 2>/dev/null || true)"
swiftc -O -parse-as-library -module-name BenchFloor -emit-library -static-stdlib -use-ld=lld \
    -Xlinker --version-script="$map" -Xlinker -soname=libbench-floor.so \
    -Xlinker --gc-sections -Xlinker -z -Xlinker defs "${extra[@]}" \
    -o "$out/libbench-floor.unstripped.so" bench/floor/floor.swift >&2
strip --strip-unneeded -o "$out/libbench-floor.so" "$out/libbench-floor.unstripped.so"
printf '%s\n' "$out/libbench-floor.so"
