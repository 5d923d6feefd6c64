# Step timing for .ci/run (sourced): every step prints its start and its elapsed minutes, a table
# of all steps closes the run (also when it fails or is killed), and a warning line appears once
# the run passes 60 minutes (CI gives it 90; the goal is 40).
#
#   step NAME CMD...          run CMD in the foreground as one timed step; its failure ends the run
#   step_bg NAME CMD...       start CMD as a timed step in the background, its output streamed
#                             live with "[NAME] " before each line
#   step_wait NAME...         wait for background steps; the run fails if any of them failed
#
# shellcheck shell=bash

CI_START=$(date +%s)
CI_TABLE=$(mktemp -d)/steps
: >"$CI_TABLE"
declare -A CI_BG_PIDS=()
CI_WARN_AFTER=${CI_WARN_AFTER:-3600}

_ci_elapsed() { echo $(($(date +%s) - CI_START)); }
_ci_clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
_ci_minutes() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'; }

_ci_record() {  # _ci_record NAME SECONDS RESULT: one row of the closing table
  printf '%s\t%s\t%s\t%s\n' "$(_ci_elapsed)" "$1" "$2" "$3" >>"$CI_TABLE"
  printf '<== [%s] %s: %s in %s min\n' "$(_ci_clock "$(_ci_elapsed)")" "$1" "$3" \
    "$(_ci_minutes "$2")"
}

step() {
  local name=$1 started rc=0
  shift
  printf '\n==> [%s] %s\n' "$(_ci_clock "$(_ci_elapsed)")" "$name"
  started=$(date +%s)
  # Not `"$@" || rc=$?`: errexit is off inside anything on the left of ||, so a shell function's
  # failing command would go unnoticed. A subshell with set -e, its status read after.
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  if [ "$rc" = 0 ]; then
    _ci_record "$name" $(($(date +%s) - started)) ok
  else
    _ci_record "$name" $(($(date +%s) - started)) "FAILED (exit $rc)"
    exit "$rc"
  fi
}

step_bg() {
  local name=$1
  shift
  printf '\n==> [%s] %s (in the background, lines marked [%s])\n' \
    "$(_ci_clock "$(_ci_elapsed)")" "$name" "$name"
  (
    started=$(date +%s)
    # Each line as it comes (sed -u; Python unbuffered, or a pipe holds its output in 8 KiB
    # blocks until it ends), so a run killed at its limit still shows where this step was.
    export PYTHONUNBUFFERED=1
    set +e
    (set -e; "$@") </dev/null 2>&1 | sed -u "s/^/[$name] /"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" = 0 ]; then
      _ci_record "$name" $(($(date +%s) - started)) ok
    else
      _ci_record "$name" $(($(date +%s) - started)) "FAILED (exit $rc)"
    fi
    exit "$rc"
  ) &
  CI_BG_PIDS[$name]=$!
}

step_wait() {
  local name failed=()
  for name in "$@"; do
    wait "${CI_BG_PIDS[$name]}" || failed+=("$name")
    unset "CI_BG_PIDS[$name]"
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "background steps failed: ${failed[*]} (their lines above are marked with their names)" >&2
    exit 1
  fi
}

_ci_kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do
    _ci_kill_tree "$child"
  done
  kill "$1" 2>/dev/null
}

_ci_summary() {
  local rc=$? pid total
  set +e  # the table is printed whatever fails from here
  [ -n "${CI_WARN_PID:-}" ] && _ci_kill_tree "$CI_WARN_PID"  # its sleep too
  for pid in "${CI_BG_PIDS[@]}"; do
    _ci_kill_tree "$pid"  # a background step still running when the run ends: it ends too
  done
  total=$(_ci_elapsed)
  echo
  echo "==== CI steps (minutes; a background step overlaps the ones listed around it) ===="
  printf '%-8s %-62s %8s  %s\n' "ended at" step minutes result
  sort -n -s -k1,1 "$CI_TABLE" | while IFS=$'\t' read -r at name seconds result; do
    printf '%-8s %-62s %8s  %s\n' "$(_ci_clock "$at")" "$name" "$(_ci_minutes "$seconds")" "$result"
  done
  printf '%-8s %-62s %8s  %s\n' "" "whole run" "$(_ci_minutes "$total")" \
    "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")"
  [ "$total" -gt "$CI_WARN_AFTER" ] &&
    echo "WARNING: this run took $(_ci_minutes "$total") min, past $((CI_WARN_AFTER / 60)) (goal: 40)"
  return "$rc"
}
trap _ci_summary EXIT

(
  sleep "$CI_WARN_AFTER"
  echo "WARNING: CI has run for $((CI_WARN_AFTER / 60)) minutes (goal 40, limit 90): see the step times above"
) &
CI_WARN_PID=$!
