#!/usr/bin/env bash
# The testbed's fault scenario, run while a deployment is running (after `p2pnode deploy start`):
#
#   deploy/scenario.sh [ROUND_SECONDS]     (default 1: tick_seconds 0.01)
#
# Times are counted in rounds from now. Every fault is logged by testbed.sh in
# $P2PNODE_TESTBED/faults.jsonl; `p2pnode deploy collect --faults` puts them in the report.
#   round  5: cut h3's link                      round  8: h3 back
#   round 10: limit h2 to 1 mbit/s (tc tbf)      round 14: h2 unlimited
#   round 16: drop 30% of h1's packets (nft)     round 20: h1 clean
#   round 22: SIGKILL h2's node processes; systemd restarts them and they resume
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r="${1:-1}"
tb() { bash "$here/testbed.sh" "$@"; }
at() { # wait until round $1 (counted from the scenario's start)
  local now; now="$(date +%s.%N)"
  local wait; wait="$(awk -v t0="$T0" -v r="$r" -v k="$1" -v now="$now" 'BEGIN { w = t0 + k * r - now; print (w > 0 ? w : 0) }')"
  sleep "$wait"
}
T0="$(date +%s.%N)"
at 5;  tb fault h3 cut
at 8;  tb clear h3
at 10; tb fault h2 tbf 1mbit
at 14; tb clear h2
at 16; tb fault h1 drop 30
at 20; tb clear h1
at 22; tb fault h2 kill
echo "scenario done"
