"""Read a log of paper 004's code (experiments/pard_reference) as its run reports: per round the
test and validation Recall@10/20 and NDCG@10/20 and the attack's scores on each representation;
the round its early stop keeps (the latest with the highest validation Recall@10 + Recall@20, as
``trainer.run_experiment``), and that round's figures.

    python experiments/pard_reference/parse_log.py LOG [--json]
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

_RECALL = re.compile(r"Recall@10 = ([0-9.]+), Recall@20 = ([0-9.]+)")
_NDCG = re.compile(r"NDCG@10 = ([0-9.]+), NDCG@20 = ([0-9.]+)")
_ATTACK = re.compile(r"attack mode: \[(\w+)\], attack score\[F1,F1\]: \[([^\]]*)\]")


def rounds(lines: list[str]) -> list[dict[str, Any]]:
    """One entry per round that finished its validation; ``attack`` is empty in a round whose
    attack was skipped (fast_eval.py's ``PARD_REF_ATTACK=chosen``: a round the early stop
    cannot report)."""
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] = {}
    phase = ""

    def close() -> None:
        if cur and "validation" in cur:
            out.append(cur)

    for line in lines:
        if "-INFO-" not in line and "attack mode" in line:
            continue  # the same attack line, printed as well as logged
        if "Round " in line and "starts" in line:
            close()
            cur = {"round": int(line.split("Round ")[1].split()[0]), "attack": {}}
        elif "Testing phase" in line:
            phase = "test"
        elif "Validating phase" in line:
            phase = "validation"
        elif (m := _RECALL.search(line)) and cur:
            cur[phase] = {"recall10": float(m[1]), "recall20": float(m[2])}
        elif (m := _NDCG.search(line)) and cur and phase in cur:
            cur[phase].update(ndcg10=float(m[1]), ndcg20=float(m[2]))
        elif (m := _ATTACK.search(line)) and cur:
            age, gender, occupation = (float(v.strip(" '")) for v in m[2].split(","))
            cur["attack"][m[1]] = {"age": age, "gender": gender, "occupation": occupation}
    close()
    return out


def chosen(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The round the code's early stop reports (``>=``: the latest of equal ones)."""
    best, pick = -1.0, None
    for e in entries:
        v = e["validation"]["recall10"] + e["validation"]["recall20"]
        if v >= best:
            best, pick = v, e
    return pick


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        entries = rounds(f.read().splitlines())
    pick = chosen(entries)
    if "--json" in sys.argv:
        print(json.dumps({"rounds": entries, "chosen": pick}))
        return
    for e in entries:
        a = e["attack"].get("euser_item")
        attack = (
            f"euser_item age {a['age']:.4f} gender {a['gender']:.4f} occupation {a['occupation']:.4f}"
            if a
            else "(attack skipped)"
        )
        print(
            f"round {e['round']:>3}  test R@10 {e['test']['recall10']:.4f} N@10 {e['test']['ndcg10']:.4f}  "
            f"val R@10+R@20 {e['validation']['recall10'] + e['validation']['recall20']:.4f}  {attack}"
        )
    if pick is not None:
        print(f"chosen: round {pick['round']} of rounds 0-{entries[-1]['round']}: {json.dumps(pick)}")


if __name__ == "__main__":
    main()
