#!/bin/sh
# tests/tsan-loop.sh — the fiber and API suites under ThreadSanitizer, many
# times over (issue 17), in a TSan build of this tree's last commit.
#
#   tests/tsan-loop.sh [reps] [build-dir]    defaults 50, /tmp/hali-tsan
#   make check-tsan                          the same (TSAN_REPS, TSAN_DIR)
#
# Clones HEAD into |build-dir| (kept: a second run only rebuilds what
# changed), configures it with CC=clang --enable-sanitizers=thread, runs
# the whole suite once (TSAN_FULL=0 skips that), then tests/check_fiber and
# tests/check_api |reps| times each.  Any report fails the run: TSan exits
# 66 in the test's forked child (Check prints "Early exit with return value
# 66") and writes the report to |build-dir|/tsan.PID.  Not part of make
# check: on two loaded cores it takes well over the ~5 minutes CI allows
# (doc/fibers.md, "Testing under ThreadSanitizer", has the measured time).
set -eu
reps=${1:-${TSAN_REPS:-50}}
dir=${2:-${TSAN_DIR:-/tmp/hali-tsan}}
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${TSAN_JOBS:-2}
command -v clang >/dev/null 2>&1 || {
  echo "tsan-loop: needs clang (apt-get install clang)" >&2
  exit 77
}
if [ -d "$dir/.git" ]; then
  (cd "$dir" && git fetch -q "$src" HEAD && git checkout -q -f FETCH_HEAD)
else
  git clone -q "$src" "$dir"
fi
cd "$dir"
if [ ! -f Makefile ] || [ configure.ac -nt Makefile ]; then
  autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
  ./configure --quiet CC=clang --enable-sanitizers=thread
fi
make -s -j"$jobs" >/dev/null
rm -f "$dir"/tsan.*
# (tests/tsan.supp: third-party reports only, each with its reason.)
TSAN_OPTIONS="halt_on_error=1:exitcode=66:log_path=$dir/tsan:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$src/tests/tsan.supp"
export TSAN_OPTIONS
# Everything runs 5-15x slower under TSan, and more on loaded cores: the
# suites' timeouts (hang bounds) and latency bounds stretch with it.
CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}
HALI_TEST_SLOW=${HALI_TEST_SLOW:-20}
export CK_TIMEOUT_MULTIPLIER HALI_TEST_SLOW
start=$(date +%s)
if [ "${TSAN_FULL:-1}" != 0 ]; then
  echo "tsan-loop: the whole suite under TSan"
  make -s -j"$jobs" check >/dev/null 2>&1 || {
    echo "tsan-loop: make check failed under TSan:" >&2
    grep -l "^FAIL\|^ERROR" tests/*.log tests/*/*.log 2>/dev/null >&2 || true
    ls "$dir"/tsan.* 2>/dev/null >&2 || true
    exit 1
  }
fi
# (and the kernels they load, which only make check would build otherwise)
make -s -j"$jobs" tests/check_fiber tests/check_api \
  tests/kernels/test_imports.so >/dev/null
fails=0
i=1
while [ "$i" -le "$reps" ]; do
  for t in check_fiber check_api; do
    if ! tests/$t >"$dir/last-$t.log" 2>&1; then
      fails=$((fails + 1))
      echo "tsan-loop: run $i of tests/$t failed:" >&2
      grep -E ":[FE]:|Early exit|WARNING: ThreadSanitizer" \
        "$dir/last-$t.log" >&2 || tail -5 "$dir/last-$t.log" >&2
      cp "$dir/last-$t.log" "$dir/failed-$i-$t.log"
    fi
  done
  echo "tsan-loop: run $i of $reps done, $fails failed so far ($(( $(date +%s) - start )) s)"
  i=$((i + 1))
done
reports=$(ls "$dir"/tsan.* 2>/dev/null | wc -l)
echo "tsan-loop: $reps runs each of check_fiber and check_api," \
  "$fails failed, $reports TSan report file(s), $(( $(date +%s) - start )) s"
[ "$fails" -eq 0 ] && [ "$reports" -eq 0 ]
