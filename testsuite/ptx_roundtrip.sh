#!/bin/sh
# Usage: ptx_roundtrip.sh nvcc|clang DIR — for each example's PTX of that
# compiler (DIR/*/NAME.ptx or DIR/*/NAME.clang.ptx), the IR that
# `qgc --emit=ptx` prints (with locations), parsed back by qgc-opt, prints
# identically. Names every file that does not. (The generic form and the shared
# suite are round-tripped in-process by tests/test_roundtrip.py.)
compiler=$1
dir=$2
status=0
tmp=$(mktemp -d)
for f in "$dir"/*/*.ptx; do
  case "$f" in
    *.clang.ptx) [ "$compiler" = clang ] || continue ;;
    *) [ "$compiler" = nvcc ] || continue ;;
  esac
  qgc "$f" --emit=ptx --print-debuginfo > "$tmp/a.mlir" || { echo "FAIL emit: $f"; status=1; continue; }
  qgc-opt "$tmp/a.mlir" --print-debuginfo > "$tmp/b.mlir" || { echo "FAIL parse: $f"; status=1; continue; }
  if cmp -s "$tmp/a.mlir" "$tmp/b.mlir"; then
    echo "ok: $f"
  else
    echo "FAIL differs: $f"; diff "$tmp/a.mlir" "$tmp/b.mlir" | head -5; status=1
  fi
done
rm -rf "$tmp"
exit $status
