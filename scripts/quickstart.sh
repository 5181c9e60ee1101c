#!/usr/bin/env bash
# Install what cardbench needs to run (scripts/setup.sh: FUSE, e2fsprogs, util-linux; no test
# tools, no kernel), then show cardbench at work: the demo drawer of emulated cards where this
# machine can run it (root, FUSE, loop devices), otherwise a real test of /var/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if python3 -m cardbench demo --check >/dev/null 2>&1; then
  exec python3 -m cardbench demo
else
  python3 -m cardbench demo --check || true
  echo "quickstart: benchmarking /var/tmp instead" >&2
  exec python3 -m cardbench run /var/tmp
fi
