#!/usr/bin/env bash
# Run the reproduced tables and figures at full size, one after the other, into results/.
# Every experiment resumes where it stopped, so this script can be interrupted and rerun.
#   bash experiments/reproduce.sh                 # everything (many hours on 2 cores)
#   bash experiments/reproduce.sh table3 mixing   # a selection
#   SEEDS=0 bash experiments/reproduce.sh table2  # fewer seeds for a first look
set -euo pipefail
cd "$(dirname "$0")/.."
P2PNODE=${P2PNODE:-.venv/bin/p2pnode}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # one BLAS thread: faster on shared cores
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(mixing table2 table3 samo-vs-base static-vs-dynamic table8 fig3 table7 table6 table4 table5 fig5
    colluder-probes fl-probes dp-probes)
fi
for name in "${names[@]}"; do
  echo "== $name"
  "$P2PNODE" experiment "$name" --out "results/$name" ${SEEDS:+--seeds "$SEEDS"}
done
