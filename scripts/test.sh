#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real loop devices, FUSE, SQLite, PostgreSQL,
# fio and Chromium). Extra arguments go to pytest (both passes).
#
#   bash scripts/test.sh            # everything (CI: .ci/run)
#   bash scripts/test.sh --quick    # a developer's inner loop: every test not marked slow
#
# Two passes (README, "Tests"): first every test not marked `timing`, on $CARDBENCH_TEST_WORKERS
# pytest-xdist workers (default 2; 0 runs it in this process): most of the suite waits on paced
# emulated cards, so two run side by side; then the `timing` tests (a measured rate or time
# against a set one) alone, one at a time, so no test of ours disturbs them. Each pass lists its
# ten slowest tests (--durations=10, pyproject's addopts); the end says how long the whole run
# took (CARDBENCH_SKIP_SETUP=1 skips scripts/setup.sh). The exit code is the first failing pass's pytest exit code (5, "no tests ran", fails too,
# see below).
set -euo pipefail
cd "$(dirname "$0")/.."

select=""
args=()
for a in "$@"; do
  if [ "$a" = --quick ]; then
    select="not slow"
  else
    args+=("$a")
  fi
done
workers="${CARDBENCH_TEST_WORKERS:-2}"

[ "${CARDBENCH_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh

both() { if [ -n "$select" ]; then echo "($1) and $select"; else echo "$1"; fi; }
parallel=()
[ "$workers" != 0 ] && parallel=(-n "$workers" --dist loadfile)

# a short temp root: an xdist worker's tmp_path is one level deeper (popen-gw0/), and an emulated
# card's control socket under it must stay within AF_UNIX's 108 bytes
basetemp=$(mktemp -d /tmp/cbt-XXXXXX)

start=$(date +%s)
rc=0
echo "== pass 1: tests not marked timing, ${workers/#0/no} xdist workers"
python3 -m pytest -q --basetemp="$basetemp/1" -m "$(both "not timing")" ${parallel[@]+"${parallel[@]}"} ${args[@]+"${args[@]}"} || rc=$?
echo "== pass 2: tests marked timing, one at a time"
rc2=0
python3 -m pytest -q -p no:xdist --basetemp="$basetemp/2" -m "$(both "timing")" ${args[@]+"${args[@]}"} || rc2=$?
# 5 is "no tests ran": with no arguments (the whole suite, CI) either pass finding none fails the
# run; tests named on the command line may all fall in one pass, and only none in both fails
if [ "${#args[@]}" -gt 0 ]; then
  if [ "$rc" = 5 ] && [ "$rc2" != 5 ]; then rc=0; echo "(pass 1 had none of the tests asked for)"; fi
  if [ "$rc2" = 5 ] && [ "$rc" != 5 ]; then rc2=0; echo "(pass 2 had none of the tests asked for)"; fi
fi
[ "$rc" = 0 ] && rc=$rc2
took=$(( $(date +%s) - start ))
# kept after a failure (what the failing tests left, to look at); nothing is mounted in it by then
[ "$rc" = 0 ] && rm -rf --one-file-system "$basetemp"
echo "tests took $((took / 60)) min $((took % 60)) s${select:+ (--quick: tests marked slow not run)}, pytest exit $rc"
exit "$rc"
