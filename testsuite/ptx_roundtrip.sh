#!/bin/sh
# Usage: ptx_roundtrip.sh FILE.ptx... — for each file, the IR that
# `qgc --emit=ptx` prints (with locations), parsed back by qgc-opt, prints
# identically. Names every file that does not. (Every example and shared
# kernel is round-tripped in-process, pretty and generic, by
# tests/test_frontend.py; this checks the two drivers agree on a sample.)
status=0
tmp=$(mktemp -d)
for f in "$@"; do
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
