#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real loop devices, FUSE, SQLite, PostgreSQL,
# fio and Chromium). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec python3 -m pytest -q "$@"
