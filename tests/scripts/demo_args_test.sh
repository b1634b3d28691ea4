#!/usr/bin/env bash
# scripts/demo refuses bad --model, --bpe and --hidden values before it installs,
# builds or starts anything: exit 2 with one line naming the flag.
# $1: the repository root.
set -uo pipefail
root=$1
failures=0
expect_refused() {
  local flag=$1
  shift
  local err
  err=$(bash "$root/scripts/demo" "$@" 2>&1 >/dev/null)
  local rc=$?
  if [ "$rc" -ne 2 ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || [[ "$err" != *"$flag"* ]]; then
    echo "FAIL: demo $*: exit $rc, stderr: $err"
    failures=$((failures + 1))
  fi
}
expect_refused --model --model mamba
expect_refused --model --model
expect_refused --bpe --bpe 100
expect_refused --bpe --bpe -5
expect_refused --bpe --model llama --bpe x
expect_refused --hidden --hidden 6
expect_refused --hidden --hidden 0
expect_refused --hidden --hidden wide
[ "$failures" -eq 0 ] && echo "demo_args: all refused as expected"
exit "$failures"
