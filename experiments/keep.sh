#!/usr/bin/env bash
# Keep a finished experiment in the repository with its runs, or bring the kept runs back.
#
# results/ is not committed, so without its runs a committed report can be read but not rebuilt,
# and an experiment that takes longer than one sitting starts again from nothing. A run's file
# (OUT/runs/MODE-KEY.json) is its slimmed summary, 15-60 KB, named by a key of its configuration,
# so the runs can travel with the report:
#
#   bash experiments/keep.sh NAME [FROM]           # FROM (default results/NAME): report.md,
#       # results.csv, results.json, the plots and runs/ go to experiments/reports/NAME/ (runs are
#       # added to those already kept there), then REPRODUCTION.md's summary is regenerated
#   bash experiments/keep.sh --unfinished NAME [FROM]   # an experiment stopped part way: only
#       # its finished runs go to experiments/unfinished/NAME/runs/ (the summary reads reports/
#       # only, so the committed report of NAME, if any, stays what it was)
#   bash experiments/keep.sh --restore NAME [TO]   # the runs kept in reports/NAME/runs/ and in
#       # unfinished/NAME/runs/ go to TO/runs (default results/NAME): the same `p2pnode experiment
#       # ... --out TO` then runs only the runs not kept, and `--report-only` rebuilds the report
set -euo pipefail
cd "$(dirname "$0")/.."
P2PNODE=${P2PNODE:-.venv/bin/p2pnode}
REPORTS=${REPORTS:-experiments/reports}     # where reports are kept (a test points it elsewhere)
DOC=${DOC:-experiments/REPRODUCTION.md}     # whose summary block is regenerated
UNFINISHED=${UNFINISHED:-experiments/unfinished}   # runs of experiments stopped part way
usage() { echo "usage: bash experiments/keep.sh [--restore | --unfinished] NAME [FOLDER]" >&2; exit 2; }
restore=0
unfinished=0
if [ "${1:-}" = "--restore" ]; then restore=1; shift; elif [ "${1:-}" = "--unfinished" ]; then unfinished=1; shift; fi
[ $# -ge 1 ] && [ $# -le 2 ] || usage
name=$1
case "$name" in ""|*/*|.*) echo "keep.sh: NAME is a report's folder name, not a path: '$name'" >&2; exit 2;; esac
kept="$REPORTS/$name"
folder=${2:-results/$name}
part="$UNFINISHED/$name"
# The point of keeping runs is that they are committed: refuse a destination git would ignore (a
# repository's `runs/` rule once did that silently). Outside a git work tree there is nothing to check.
committable() {
  local probe="$1/runs/simulate-0.json" top at="$1"
  while [ ! -d "$at" ]; do at=$(dirname "$at"); done
  top=$(git -C "$at" rev-parse --show-toplevel 2>/dev/null) || return 0
  if git -C "$top" check-ignore -q --no-index "$(realpath -m "$probe")"; then
    echo "keep.sh: git ignores $1/runs (git check-ignore -v $probe), so the runs would not be committed; fix .gitignore first" >&2
    exit 1
  fi
}
if [ $restore -eq 1 ]; then
  found=0
  for from in "$kept/runs" "$part/runs"; do
    if compgen -G "$from/*.json" > /dev/null; then
      mkdir -p "$folder/runs"
      cp -n "$from"/*.json "$folder/runs/"
      echo "restored $(ls "$from"/*.json | wc -l) runs of $from into $folder/runs"
      found=1
    fi
  done
  [ $found -eq 1 ] || { echo "keep.sh: neither $kept/runs nor $part/runs holds runs to restore" >&2; exit 1; }
  exit 0
fi
if [ $unfinished -eq 1 ]; then
  if ! compgen -G "$folder/runs/*.json" > /dev/null; then
    echo "keep.sh: $folder/runs holds no runs" >&2; exit 1
  fi
  committable "$part"
  mkdir -p "$part/runs"
  cp "$folder"/runs/*.json "$part/runs/"
  echo "kept $(ls "$part"/runs/*.json | wc -l) finished runs of $folder in $part/runs (no report)"
  exit 0
fi
if [ ! -f "$folder/results.json" ] || [ ! -f "$folder/report.md" ]; then
  echo "keep.sh: $folder has no finished report (results.json, report.md); run the experiment first" >&2
  exit 1
fi
if ! compgen -G "$folder/runs/*.json" > /dev/null; then
  echo "keep.sh: $folder/runs holds no runs" >&2; exit 1
fi
committable "$kept"
mkdir -p "$kept/runs"
rm -f "$kept"/*.png
cp "$folder/report.md" "$folder/results.json" "$kept/"
for f in "$folder"/results.csv "$folder"/*.png; do [ -f "$f" ] && cp "$f" "$kept/"; done
cp "$folder"/runs/*.json "$kept/runs/"
rm -rf "$part"  # its runs are in the report's now
echo "kept $folder in $kept ($(ls "$kept"/runs/*.json | wc -l) runs)"
"$P2PNODE" experiment summary "$REPORTS" --write "$DOC"
