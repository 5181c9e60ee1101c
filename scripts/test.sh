#!/usr/bin/env bash
# Set everything up, then run the whole test suite (real loop devices, FUSE, SQLite, PostgreSQL,
# fio and Chromium). Extra arguments go to pytest.
#
#   bash scripts/test.sh            # everything (CI: .ci/run)
#   bash scripts/test.sh --quick    # a developer's inner loop: every test not marked slow, no VM tier
#   bash scripts/test.sh tests/vm   # extra arguments: one pytest run of what they name (no lint)
#
# First the lint: ruff, mypy, then the layer contract (import-linter), as pyproject's [tool.ruff],
# [tool.mypy] and [tool.importlinter] set them (not with extra arguments). A finding stops the run
# there, before any test, with that tool's exit code (1 for findings).
# Three passes (docs/testing.md): the tests marked `timing` (a measured rate or time against a
# set one) apart from the rest, on $CARDBENCH_TIMING_WORKERS workers (default 2: two paced
# emulated cards at a time, one test file per worker), each tried up to 3 times; then every
# other host test on $CARDBENCH_TEST_WORKERS pytest-xdist workers (default 3 on any number of
# cores: they spend about half their time waiting on paced cards, servers and children; 0: one
# process); then the booted-kernel tier (tests/vm) on $CARDBENCH_VM_WORKERS (default 2: a TCG
# guest keeps a core busy). The ten slowest tests of
# each pass are listed (--durations=10, pyproject's addopts), then how long each pass and the
# whole run took. The exit code is the first failing pass's pytest code (5, "no tests ran",
# fails too). CARDBENCH_SKIP_SETUP=1 skips `scripts/setup.sh --tests` (the run and test
# packages, QEMU and the guest kernel among them, and `pip install -e '.[test]'`).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
args=()
for a in "$@"; do
  if [ "$a" = --quick ]; then
    quick=1
  else
    args+=("$a")
  fi
done
workers="${CARDBENCH_TEST_WORKERS:-3}"
timing_workers="${CARDBENCH_TIMING_WORKERS:-2}"
vm_workers="${CARDBENCH_VM_WORKERS:-2}"

[ "${CARDBENCH_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh --tests

lint() {   # ruff, mypy, then the layers: the first that finds anything ends the run with its exit code
  local t0 tool lrc=0
  t0=$(date +%s)
  for tool in ruff mypy; do
    python3 -m "$tool" --version >/dev/null 2>&1 || {
      echo "lint: $tool is not installed (scripts/setup.sh, or pip install -e '.[test]'); no test was run" >&2
      exit 1
    }
  done
  python3 -c 'import importlinter' 2>/dev/null || {
    echo "lint: import-linter is not installed (scripts/setup.sh, or pip install -e '.[test]'); no test was run" >&2
    exit 1
  }
  python3 -m ruff check --quiet || lrc=$?
  if [ "$lrc" != 0 ]; then
    echo "lint: ruff found the problems above (exit $lrc; import order: python3 -m ruff check --fix --select I);" \
      "no test was run" >&2
    exit "$lrc"
  fi
  python3 -m mypy || lrc=$?
  if [ "$lrc" != 0 ]; then
    echo "lint: mypy found the problems above (exit $lrc); no test was run" >&2
    exit "$lrc"
  fi
  # import-linter's console script, run by this python (no `python -m` entry point of its own)
  python3 -c 'import sys; from importlinter.cli import lint_imports_command; sys.argv[0] = "lint-imports"; lint_imports_command()' \
    --no-cache > "${TMPDIR:-/tmp}/cardbench-layers.txt" 2>&1 || lrc=$?
  if [ "$lrc" != 0 ]; then
    cat "${TMPDIR:-/tmp}/cardbench-layers.txt" >&2
    echo "lint: the layer contract is broken (exit $lrc; pyproject's [tool.importlinter], docs/architecture.md);" \
      "no test was run" >&2
    exit "$lrc"
  fi
  echo "lint (ruff, mypy, layers) took $(( $(date +%s) - t0 )) s"
}
[ ${#args[@]} -gt 0 ] || lint

parallel=(-p no:xdist)
[ "$workers" != 0 ] && parallel=(-n "$workers" --dist loadgroup)
timing_parallel=(-p no:xdist)
[ "$timing_workers" != 0 ] && [ "$timing_workers" != 1 ] && timing_parallel=(-n "$timing_workers" --dist loadgroup)
vm_parallel=(-p no:xdist)
[ "$vm_workers" != 0 ] && [ "$vm_workers" != 1 ] && vm_parallel=(-n "$vm_workers" --dist loadgroup)
# a short temp root: an xdist worker's tmp_path is one level deeper (popen-gw0/), and an emulated
# card's control socket under it must stay within AF_UNIX's 108 bytes (every drawer test failed)
basetemp=$(mktemp -d /tmp/cbt-XXXXXX)
slow=""
[ "$quick" = 1 ] && slow=" and not slow"

start=$(date +%s)
rc=0
pass() {   # pass NAME PYTEST-ARGS...: one pytest run, its time said; the first failure's code is kept
  local name=$1 t0 prc=0
  shift
  t0=$(date +%s)
  python3 -m pytest -q "$@" || prc=$?
  # --quick may leave a pass with nothing to run (pytest's 5): that pass is simply empty
  [ "$quick" = 1 ] && [ "$prc" = 5 ] && prc=0
  echo "$name took $(( ($(date +%s) - t0) / 60 )) min $(( ($(date +%s) - t0) % 60 )) s, pytest exit $prc"
  [ "$rc" = 0 ] && rc=$prc
  return 0
}
if [ ${#args[@]} -gt 0 ]; then
  # what the caller named, in one pytest run
  pass "tests" --basetemp="$basetemp/t" "${parallel[@]}" ${slow:+-m "not slow"} "${args[@]}"
else
  # 1. the timing tests (a measured rate or time against a set one), apart from the CPU-heavy
  #    rest: two at a time (each mostly waits on its paced card), each tried up to 3 times
  #    (pytest-rerunfailures: a figure a busy machine disturbed is measured again, every retry
  #    shown as R; a wrong figure three times fails)
  pass "timing tests" --basetemp="$basetemp/timing" "${timing_parallel[@]}" --reruns 2 --reruns-delay 1 \
    -m "timing$slow" --ignore=tests/vm
  # 2. everything else on the host, on $workers workers (most of it waits on paced emulated cards)
  pass "other host tests" --basetemp="$basetemp/host" "${parallel[@]}" -m "not timing$slow" --ignore=tests/vm
  # 3. the booted-kernel tier, one guest per test module (a TCG guest keeps a core busy)
  [ "$quick" = 1 ] || pass "VM tier (tests/vm)" --basetemp="$basetemp/vm" "${vm_parallel[@]}" tests/vm
fi
took=$(( $(date +%s) - start ))
# kept after a failure (what the failing tests left, to look at); nothing is mounted in it by then
[ "$rc" = 0 ] && rm -rf --one-file-system "$basetemp"
echo "tests took $((took / 60)) min $((took % 60)) s (workers: ${timing_workers} for timing tests, ${workers} for the rest, ${vm_workers} for the VM tier$([ "$quick" = 1 ] && echo ', --quick: tests marked slow and the VM tier not run')), exit $rc"
exit "$rc"
