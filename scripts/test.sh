#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real loop devices, FUSE, SQLite, PostgreSQL,
# fio and Chromium). Extra arguments go to pytest.
#
#   bash scripts/test.sh            # everything (CI: .ci/run)
#   bash scripts/test.sh --quick    # a developer's inner loop: every test not marked slow, no VM tier
#   bash scripts/test.sh tests/vm   # extra arguments: one pytest run of what they name
#
# On $CARDBENCH_TEST_WORKERS pytest-xdist workers (default 2; 0: no xdist, one process), as
# README's "Tests" says why: most of the suite waits on paced emulated cards. The tests marked
# `timing` (a measured rate or time against a set one) are one group that one worker runs one at
# a time, from the start; the rest are shared by file (tests/conftest.py). The ten slowest tests
# are listed at the end (--durations=10, pyproject's addopts), then how long the whole run took.
# The exit code is pytest's (5, "no tests ran", fails too). CARDBENCH_SKIP_SETUP=1 skips
# scripts/setup.sh (the packages and `pip install -e '.[test]'`).
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
workers="${CARDBENCH_TEST_WORKERS:-2}"

[ "${CARDBENCH_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh

parallel=(-p no:xdist)
[ "$workers" != 0 ] && parallel=(-n "$workers" --dist loadgroup)
# a short temp root: an xdist worker's tmp_path is one level deeper (popen-gw0/), and an emulated
# card's control socket under it must stay within AF_UNIX's 108 bytes (every drawer test failed)
basetemp=$(mktemp -d /tmp/cbt-XXXXXX)

start=$(date +%s)
rc=0
if [ ${#args[@]} -gt 0 ]; then
  # what the caller named, in one pytest run
  python3 -m pytest -q --basetemp="$basetemp/t" "${parallel[@]}" ${select[@]+"${select[@]}"} "${args[@]}" || rc=$?
else
  # the host tiers (rules on models, measurement on emulated cards), then the booted-kernel tier
  # (tests/vm) on its own: a TCG guest keeps a core busy, which would disturb the timing tests
  python3 -m pytest -q --basetemp="$basetemp/t" "${parallel[@]}" ${select[@]+"${select[@]}"} --ignore=tests/vm || rc=$?
  host=$(( $(date +%s) - start ))
  echo "host tests took $((host / 60)) min $((host % 60)) s, pytest exit $rc"
  if [ ${#select[@]} -eq 0 ]; then
    vrc=0
    # one guest per test module, two modules at once (one core each)
    python3 -m pytest -q --basetemp="$basetemp/vm" "${parallel[@]}" tests/vm || vrc=$?
    vm=$(( $(date +%s) - start - host ))
    echo "VM tier (tests/vm) took $((vm / 60)) min $((vm % 60)) s, pytest exit $vrc"
    [ "$rc" = 0 ] && rc=$vrc
  fi
fi
took=$(( $(date +%s) - start ))
# kept after a failure (what the failing tests left, to look at); nothing is mounted in it by then
[ "$rc" = 0 ] && rm -rf --one-file-system "$basetemp"
echo "tests took $((took / 60)) min $((took % 60)) s (${workers} xdist workers$([ ${#select[@]} -gt 0 ] && echo ', --quick: tests marked slow and the VM tier not run')), exit $rc"
exit "$rc"
