#!/usr/bin/env bash
# has-product.sh SWIFT SCRATCH NAME — exit 0 if the package (current directory) declares a product
# NAME or an executable target NAME (which SwiftPM turns into a product), 1 if not, 2 on error.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: has-product.sh SWIFT SCRATCH NAME" >&2; exit 2; }
json=$("$1" package --scratch-path "$2" dump-package 2>/dev/null) || {
    echo "has-product.sh: '$1 package dump-package' failed" >&2
    exit 2
}
NAME=$3 python3 -c '
import json, os, sys
d = json.load(sys.stdin)
n = os.environ["NAME"]
found = any(p.get("name") == n for p in d.get("products", [])) or any(
    t.get("name") == n and t.get("type") == "executable" for t in d.get("targets", []))
sys.exit(0 if found else 1)
' <<<"$json"
