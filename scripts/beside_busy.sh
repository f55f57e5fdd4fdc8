#!/usr/bin/env bash
# Run a command beside N busy processes (each spins on a core, as a browser or a notebook takes
# a laptop's): bash scripts/beside_busy.sh N COMMAND [ARGS...]. Exits with the command's status;
# the busy processes end with it (and after 40 minutes at most, whatever happens).
set -uo pipefail
n="$1"; shift
busy=()
for _ in $(seq 1 "$n"); do
  timeout 2400 python3 -c "while True: pass" &
  busy+=("$!")
done
"$@"
rc=$?
kill "${busy[@]}" 2>/dev/null
wait "${busy[@]}" 2>/dev/null
exit "$rc"
