#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real loop devices, FUSE, SQLite, PostgreSQL,
# fio and Chromium). Extra arguments go to pytest.
#
#   bash scripts/test.sh            # everything (CI: .ci/run)
#   bash scripts/test.sh --quick    # a developer's inner loop: every test not marked slow
#
# The ten slowest tests are listed at the end (--durations=10, pyproject's addopts), then how
# long the whole run took. The exit code is pytest's (5, "no tests ran", fails too).
set -euo pipefail
cd "$(dirname "$0")/.."

select=()
args=()
for a in "$@"; do
  if [ "$a" = --quick ]; then
    select=(-m "not slow")
  else
    args+=("$a")
  fi
done

bash scripts/setup.sh

start=$(date +%s)
rc=0
python3 -m pytest -q ${select[@]+"${select[@]}"} ${args[@]+"${args[@]}"} || rc=$?
took=$(( $(date +%s) - start ))
echo "tests took $((took / 60)) min $((took % 60)) s${select[0]+ (--quick: tests marked slow not run)}, pytest exit $rc"
exit "$rc"
