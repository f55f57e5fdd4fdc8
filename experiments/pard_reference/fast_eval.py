"""A faster evaluation for paper 004's code when it runs beside p2pnode (experiments/pard_reference).

The code's ``Trainer.fed_evaluate`` copies the whole client model (estimators included) for each
of the 943 users twice a round, which took about half a minute a round here. This replaces it
with the same arithmetic on the same parameters: each user's user rows summed, the server's
item table (and MLP where the server holds it) or the client's own, the MLP's layers applied to
the test item and its negatives, and the code's own ``compute_metrics`` on the scores. It reads
no random number, so the run's draws are what they were; on the logged figures (Recall@10/20,
NDCG@10/20, the BCE loss, six decimals) the two agree. Imported by the patched run scripts; it
lives in the code's folder at run time (prepare.py copies it there).

With ``PARD_REF_ATTACK=chosen`` in the environment, the attack (``eval_all_privacy``, another half
minute a round) runs only in the rounds the early stop could report: those whose validation
Recall@10 + Recall@20 reaches the best so far (``>=``, the code's own test). The code reseeds every
generator at the start of ``eval_all_privacy`` and then draws a fixed number of values (fixed
epochs, batch sizes and shapes), so the generators' state after it is the same every round; a
skipped round sets that state, saved after the first attack, and the rest of the run draws what it
would have drawn. The rounds it skips log no attack line; the reported round's figures are those of
the unchanged code (checked against a full log, experiments/pard_reference/logs).
"""

import os
import random

import numpy as np
import torch
import trainer
from utils import compute_metrics


def _params(self, base, user):
    """``load_local_param``'s values without its copies."""
    out = dict(base)
    for key in self.server_keys:
        if key in self.server_model_param:
            out[key] = self.server_model_param[key]
    own = self.client_model_params.get(user, {})
    for key in self.client_keys:
        if key in own and own[key].shape == out[key].shape:
            out[key] = own[key]
    return out


def fed_evaluate(self, evaluate_data):
    cfg = self.config
    n, neg = cfg["num_users"], cfg["NUM_NEG"]
    base = self.client_model.state_dict()
    per_user = [_params(self, base, u) for u in range(n)]
    items = torch.cat([evaluate_data[1].view(n, 1), evaluate_data[3].view(n, neg)], dim=1)
    layers = 0
    while f"fc_layers.{layers}.weight" in base:
        layers += 1
    scores = []
    with torch.no_grad():
        for u, p in enumerate(per_user):
            q = p["embedding_item.weight"][items[u]]
            user = (p["embedding_euser.weight"][0] + p["embedding_puser.weight"][0]).expand(q.shape[0], -1)
            x = torch.cat([user, q], dim=-1)
            for i in range(layers):
                x = torch.relu(
                    torch.nn.functional.linear(x, p[f"fc_layers.{i}.weight"], p[f"fc_layers.{i}.bias"])
                )
            logit = torch.nn.functional.linear(x, p["affine_output.weight"], p["affine_output.bias"])
            scores.append(torch.sigmoid(logit).view(-1))
    s = torch.stack(scores)
    y = torch.FloatTensor([1] + [0] * neg)
    loss = sum(self.client_crit(s[u], y).item() for u in range(n)) / n
    recall, ndcg = compute_metrics(
        evaluate_data, s[:, :1].reshape(-1, 1), s[:, 1:].reshape(-1, 1), cfg["recall_k"]
    )
    _last_recalls.append(recall)
    return recall, ndcg, loss


_last_recalls: list = []  # this round's evaluations: test, then validation
_state: dict = {"best": None, "after": None}
_attack = trainer.eval_all_privacy


def _rng_state():
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def eval_all_privacy(*args, **kwargs):
    """The attack in the rounds the early stop may report; elsewhere only its effect on the RNGs."""
    validation = _last_recalls[-1]
    _last_recalls.clear()
    best = _state["best"]
    if best is None or np.sum(validation) >= best or _state["after"] is None:
        _state["best"] = float(np.sum(validation)) if best is None else max(best, float(np.sum(validation)))
        out = _attack(*args, **kwargs)
        _state["after"] = _rng_state()
        return out
    py, npy, th = _state["after"]
    random.setstate(py)
    np.random.set_state(npy)
    torch.set_rng_state(th)
    return None


trainer.Trainer.fed_evaluate = fed_evaluate
if os.environ.get("PARD_REF_ATTACK") == "chosen":
    trainer.eval_all_privacy = eval_all_privacy
