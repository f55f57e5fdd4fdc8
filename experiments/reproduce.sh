#!/usr/bin/env bash
# Run the reproduced tables and figures at full size, one after the other, into results/, then
# print the summary of every finished one against the paper (p2pnode experiment summary results).
# Every experiment resumes where it stopped, so this script can be interrupted and rerun; the
# times it prints are those of this invocation (runs finished before are read, not re-run). An
# experiment that fails (a refusal, a crash) is reported and the others still run; the script
# then exits 1. A run that an earlier experiment already made (the same configuration, seed
# included: fig5's noiseless Rand-Gossip rows are table3's GMF rows) is copied from results/, not
# run again (--reuse-runs).
#   bash experiments/reproduce.sh                 # everything below (~30 h of one core's work;
#                                                 # python -m bench.reproduction_time --results experiments/reports)
#   bash experiments/reproduce.sh table3 mixing   # a selection
#   bash experiments/reproduce.sh table3-long table3-bound   # Table III at 1,600 rounds and at the
#                                                 # paper's bound (3,000 / 3,600 rounds): ~1.5 h and
#                                                 # ~7 h of one core, one run at a time beside others
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
    colluder-probes fl-probes dp-probes eq4-readings churn aia-fl aia-gossip pard-table3 pard-planted pard-ablation pard-eta pard-lambda defences-gossip eval-full reuseknn knn-p2p exposure dp-selective dp-audit mia-roc)
fi
clock() { printf '%dh%02dm%02ds' $(($1 / 3600)) $(($1 % 3600 / 60)) $(($1 % 60)); }
timings=()
failed=()
begin=$SECONDS
for name in "${names[@]}"; do
  echo "== $name"
  start=$SECONDS
  if "$P2PNODE" experiment "$name" --out "results/$name" --reuse-runs results --workers "$WORKERS" \
    ${SEEDS:+--seeds "$SEEDS"}; then
    took=$(clock $((SECONDS - start)))
  else
    rc=$?
    took="$(clock $((SECONDS - start))), FAILED (exit $rc)"
    failed+=("$name")
  fi
  timings+=("$(printf '%-20s %s' "$name" "$took")")
  echo "== $name took $took"
done
echo "== times (this run, workers $WORKERS${SEEDS:+, seeds $SEEDS})"
printf '  %s\n' "${timings[@]}"
echo "  $(printf '%-20s %s' total "$(clock $((SECONDS - begin)))")"
echo "== summary of results/ against the papers"
"$P2PNODE" experiment summary results || true
if [ ${#failed[@]} -gt 0 ]; then
  echo "== failed: ${failed[*]} (rerun them: bash experiments/reproduce.sh ${failed[*]})" >&2
  exit 1
fi
