#!/usr/bin/env bash
# Run the reproduced tables and figures at full size, one after the other, into results/.
# Every experiment resumes where it stopped, so this script can be interrupted and rerun; the
# times it prints are those of this invocation (runs finished before are read, not re-run).
#   bash experiments/reproduce.sh                 # everything (~10.5 h of one core's work; projected
#                                                 # by python -m bench.reproduction_time)
#   bash experiments/reproduce.sh table3 mixing   # a selection
#   SEEDS=0 bash experiments/reproduce.sh table2  # fewer seeds for a first look
#   WORKERS=2 bash experiments/reproduce.sh       # simulations in 2 processes at once
set -euo pipefail
cd "$(dirname "$0")/.."
P2PNODE=${P2PNODE:-.venv/bin/p2pnode}
WORKERS=${WORKERS:-1}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # one BLAS thread: faster on shared cores
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(mixing table2 table3 samo-vs-base static-vs-dynamic table8 fig3 table7 table6 table4 table5 fig5
    colluder-probes fl-probes dp-probes)
fi
clock() { printf '%dh%02dm%02ds' $(($1 / 3600)) $(($1 % 3600 / 60)) $(($1 % 60)); }
timings=()
begin=$SECONDS
for name in "${names[@]}"; do
  echo "== $name"
  start=$SECONDS
  "$P2PNODE" experiment "$name" --out "results/$name" --workers "$WORKERS" ${SEEDS:+--seeds "$SEEDS"}
  timings+=("$(printf '%-20s %s' "$name" "$(clock $((SECONDS - start)))")")
  echo "== $name took $(clock $((SECONDS - start)))"
done
echo "== times (this run, workers $WORKERS${SEEDS:+, seeds $SEEDS})"
printf '  %s\n' "${timings[@]}"
echo "  $(printf '%-20s %s' total "$(clock $((SECONDS - begin)))")"
