"""Attribute inference (paper 004, PARD, §II-B eq. 7; the authors' ``eval_privacy.py``), sans I/O.

An observer that sees users' models reads their private attributes off them:

- **Features** (eq. 7): per user, ``[θ_u, mean of the item rows over I'_u]``, the user embedding
  beside the mean embedding of the user's positive items. I'_u (:data:`ITEMS`) is the oracle (the
  user's training positives, 004's assumption), or inferred from the model alone: the top-M items
  by the model's own scores (:func:`inferred_items`), or the M item rows that moved most from a
  reference (:func:`changed_items`: at the FedAvg server the global model the client started
  from, at a gossip observer its own model, for the omniscient observer the mean of all models).
  A model without a user embedding (Share less) gives only the item part, or (``user_part =
  "fictive"``) a fictive user e_A trained on I'_u against the model's item side in its place, as
  the CIA trains one on V_target (000 §IV-C).
- **What an observer keeps** (:class:`AttributeObserver`): per user, the features of the latest
  model received, or a running mean over the models received (β, the CIA's eq. 4 with the
  debiased reading); colluders send their features to their group's read member, which pools
  them (:meth:`AttributeObserver.take`).
- **Shadow users**: a public share η of the users (drawn from the seed, :func:`public_users`)
  publish their attributes; the observer trains on the public users it has observed and is scored
  on the others it has observed, never on a public one (:func:`split`).
- **Classifier**: one MLP per attribute (004's shapes, trained by a :class:`Trainer`, in the
  shell ``learning.attribute_mlp.train``: SGD lr 0.05 with momentum 0.9 on batches of at most
  2,000 users, 150 epochs), on features standardised with the training users' mean and spread.
  Which epoch's classifier is scored (``select``): by default the last (``"last"``: a fixed budget
  of epochs, trained on every observed public user, looking at no scored user), or the one of
  least log-loss on a validation quarter of the public users (``"validation"``; the last epoch
  when the public users are too few to spare one), or, as 004's code does, the best epoch on the
  scored users themselves (``"best-test"``: optimistic, and labelled so wherever it is printed).
  On ML-100k the log-loss is least long before the ranking is best (the classifier grows
  overconfident while its AUC still rises): chosen so, gender's AUC is 5-6 points under the last
  epoch's, which is within a point of the best-test epoch's (REPRODUCTION.md, finding 12).
- **Metrics** (scikit-learn): for a two-class attribute the AUC (004's), for more classes the
  micro-F1 (004's) and the macro-F1; beside each the same split's majority-class and
  prior-sampling baselines (004's "Random Attack" samples from the prior).

Pure: randomness comes from the settings' seed, and the classifier's training is injected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from adversary.momentum import weights
from learning.attributes import Attribute, Attributes
from learning.params import Array, Index

Features = npt.NDArray[np.float32]
SELECTIONS = ("last", "validation", "best-test")
#: I'_u: the oracle's positives, the top-M by the model's scores, the M rows that moved most
ITEMS = ("oracle", "inferred", "changed")
USER_PARTS = ("absent", "fictive")  #: Share less: the user part absent, or a fictive e_A
#: the key of a colluder's features in its multicast (``CollusionMessage.params``)
MULTICAST_KEY = "aia"


@dataclass(frozen=True)
class AiaSettings:
    """How the attack trains and scores (the run's ``attack.aia_*`` settings)."""

    public: float = 0.2  #: η, the share of users who publish their attributes (004: 0.2)
    select: str = "last"  #: "last", "validation", or "best-test" (004's code: optimistic)
    epochs: int = 150  #: training epochs of each classifier (004's code: 150)
    lr: float = 0.05  #: SGD learning rate (004's code: 0.05, momentum 0.9)
    batch: int = 2000  #: users per step at most (004's code: 2,000)
    validation: float = 0.25  #: share of the public users kept to choose the epoch
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.public < 1.0:
            raise ValueError("the public share must be in (0, 1)")
        if self.select not in SELECTIONS:
            raise ValueError(f"select must be one of {', '.join(SELECTIONS)}")


def item_mean(params: Mapping[str, Array], items: Index, table: str = "item") -> Features:
    """The mean of the item rows ``items`` of a model (eq. 7's θ*_{u,i}); zeros for no items."""
    rows = params[table]
    if len(items) == 0:
        return np.zeros(rows.shape[1], dtype=np.float32)
    return np.asarray(rows[np.asarray(items, dtype=np.int64)].mean(axis=0), dtype=np.float32)


def feature(params: Mapping[str, Array], items: Index, user: Array | None = None) -> Features:
    """Eq. 7: ``[θ_u, mean item row over I'_u]``. ``user``: the user part to use (the model's own
    ``user`` row by default; Share less: the fictive e_A, or None for the item part alone)."""
    part = item_mean(params, items)
    if user is None and "user" in params:
        user = params["user"]
    if user is None:
        return part
    return np.concatenate([np.asarray(user, dtype=np.float32).reshape(-1), part])


def inferred_items(scores: npt.NDArray[np.floating[Any]], m: int) -> Index:
    """The top-``m`` items by a model's own scores: I'_u without the oracle (ties by item id)."""
    m = min(m, len(scores))
    order = np.lexsort((np.arange(len(scores)), -np.asarray(scores, dtype=np.float64)))
    return np.sort(order[:m]).astype(np.int64)


def changed_items(
    params: Mapping[str, Array], reference: Mapping[str, Array], m: int, table: str = "item"
) -> Index:
    """The ``m`` item rows of ``table`` farthest (L2) from ``reference``'s: I'_u without the oracle
    and without a user row (ties by item id). In FedAvg a client's upload moved exactly the rows it
    trained on (its positives and sampled negatives) from the global model it started from."""
    moved = np.asarray(params[table], dtype=np.float32) - np.asarray(reference[table], dtype=np.float32)
    distance = np.einsum("ij,ij->i", moved, moved)
    m = min(m, len(distance))
    order = np.lexsort((np.arange(len(distance)), -distance.astype(np.float64)))
    return np.sort(order[:m]).astype(np.int64)


def public_users(n_users: int, share: float, seed: int) -> npt.NDArray[np.bool_]:
    """Which users publish their attributes: ``round(share × n)`` of them, drawn from the seed."""
    rng = np.random.default_rng([seed, 0xA1A, 1])
    public = np.zeros(n_users, dtype=np.bool_)
    count = max(1, min(n_users - 1, round(share * n_users)))
    public[rng.choice(n_users, size=count, replace=False)] = True
    return public


@dataclass(frozen=True)
class Split:
    """The users of one attack: trained on (public, observed), validated on, scored on."""

    train: Index
    validation: Index
    test: Index


def split(observed: Sequence[int], public: npt.NDArray[np.bool_], settings: AiaSettings) -> Split:
    """The public users observed (less a validation part) train; the non-public observed are
    scored. A public user is never scored."""
    seen = np.array(sorted(set(observed)), dtype=np.int64)
    pub = seen[public[seen]]
    test = seen[~public[seen]]
    rng = np.random.default_rng([settings.seed, 0xA1A, 2])
    shuffled = rng.permutation(pub)
    n_val = round(settings.validation * len(pub)) if settings.select == "validation" else 0
    return Split(np.sort(shuffled[n_val:]), np.sort(shuffled[:n_val]), test)


@dataclass
class Score:
    """One attribute's attack: the figures of the chosen epoch and the baselines of its split."""

    attribute: str
    classes: int
    train: int
    test: int
    auc: float | None = None
    micro_f1: float | None = None
    macro_f1: float | None = None
    majority: dict[str, float] = field(default_factory=dict)
    prior: dict[str, float] = field(default_factory=dict)
    epoch: int = 0
    select: str = "last"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "classes": self.classes,
            "train_users": self.train,
            "test_users": self.test,
            "epoch": self.epoch,
            "select": self.select,
            "majority": self.majority,
            "prior": self.prior,
        }
        for key in ("auc", "micro_f1", "macro_f1"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def _figures(truth: npt.NDArray[np.int64], prob: npt.NDArray[np.float64], classes: int) -> dict[str, float]:
    """AUC (two classes) or micro- and macro-F1 of predicted probabilities (scikit-learn)."""
    from sklearn.metrics import f1_score, roc_auc_score  # at first use: it loads threads and more

    if classes == 2:
        if len(set(truth.tolist())) < 2:
            return {}
        return {"auc": float(roc_auc_score(truth, prob[:, 1]))}
    guess = prob.argmax(axis=1)
    labels = list(range(classes))
    return {
        "micro_f1": float(f1_score(truth, guess, labels=labels, average="micro")),
        "macro_f1": float(f1_score(truth, guess, labels=labels, average="macro", zero_division=0)),
    }


def _log_loss(truth: npt.NDArray[np.int64], prob: npt.NDArray[np.float64]) -> float:
    """Mean negative log-probability of the true classes (the validation criterion)."""
    picked = prob[np.arange(len(truth)), truth]
    return float(-np.mean(np.log(np.clip(picked, 1e-15, 1.0))))


def _one_hot(guess: npt.NDArray[np.int64], classes: int) -> npt.NDArray[np.float64]:
    prob = np.zeros((len(guess), classes))
    prob[np.arange(len(guess)), guess] = 1.0
    return prob


def baselines(
    train: npt.NDArray[np.int64], test: npt.NDArray[np.int64], classes: int, seed: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The majority class of the training users, and labels drawn from their class shares
    (004's "Random Attack"), scored as the attack is on the same test users."""
    counts = np.bincount(train, minlength=classes).astype(np.float64)
    majority = np.full(len(test), int(counts.argmax()), dtype=np.int64)
    rng = np.random.default_rng([seed, 0xA1A, 3])
    drawn = rng.choice(classes, size=len(test), p=counts / counts.sum()).astype(np.int64)
    return _figures(test, _one_hot(majority, classes), classes), _figures(
        test, _one_hot(drawn, classes), classes
    )


class Trainer(Protocol):
    """Trains a classifier on (x, y) and yields, after each epoch, what gives the class
    probabilities of each array of ``views`` under that epoch's model, to be called before the
    next epoch or never (``learning.attribute_mlp.train``: 004's MLP in torch)."""

    def __call__(
        self,
        x: Features,
        y: npt.NDArray[np.int64],
        views: Sequence[Features],
        classes: int,
        epochs: int,
        lr: float,
        batch: int,
        seed: int,
    ) -> Iterator[Callable[[], list[npt.NDArray[np.float64]]]]: ...


def attack(
    features: Mapping[int, Features],
    attribute: Attribute,
    public: npt.NDArray[np.bool_],
    settings: AiaSettings,
    trainer: Trainer,
) -> Score | None:
    """Train the attribute's classifier on the observed public users and score it on the observed
    others; None where either side has too few users (or one class only) to say anything."""
    known = [u for u in features if attribute.labels[u] >= 0]
    parts = split(known, public, settings)
    labels = attribute.labels
    classes = len(attribute.classes)
    if len(parts.train) < 2 or len(parts.test) < 1 or len(set(labels[parts.train].tolist())) < 2:
        return None
    x_all = np.stack([features[u] for u in known]).astype(np.float32)
    mean, spread = _standardiser(np.stack([features[int(u)] for u in parts.train]))
    index = {u: k for k, u in enumerate(known)}

    def rows(users: Index) -> Features:
        return (x_all[[index[int(u)] for u in users]] - mean) / spread

    x_train, x_val, x_test = rows(parts.train), rows(parts.validation), rows(parts.test)
    y_val, y_test = labels[parts.validation], labels[parts.test]
    seed = int(np.random.default_rng([settings.seed, 0xA1A, 4]).integers(2**31))
    epochs = trainer(
        x_train,
        labels[parts.train],
        (x_val, x_test),
        classes,
        settings.epochs,
        settings.lr,
        settings.batch,
        seed,
    )
    # The epoch: the last, least validation log-loss (numpy, a selection criterion only: the figures
    # reported are scikit-learn's, computed once for the chosen epoch), or the best test figure.
    best: tuple[float, int, npt.NDArray[np.float64]] | None = None
    last: tuple[int, Callable[[], list[npt.NDArray[np.float64]]]] | None = None
    for epoch, probabilities in enumerate(epochs):
        if settings.select == "last":
            last = (epoch, probabilities)  # looked at once training ended (it may end early)
            continue
        p_val, p_test = probabilities()
        if not np.isfinite(p_test).all():
            continue
        if settings.select == "validation":
            key = -_log_loss(y_val, p_val) if len(y_val) else float(epoch)
        else:
            figures = _figures(y_test, p_test, classes)
            key = figures.get("auc", figures.get("micro_f1", float("nan")))
        if key == key and (best is None or key > best[0]):
            best = (key, epoch, p_test)
    if last is not None:
        p_test = last[1]()[1]
        best = (0.0, last[0], p_test) if np.isfinite(p_test).all() else None
    test_figures = _figures(y_test, best[2], classes) if best is not None else {}
    if best is None or not test_figures:
        return None
    majority, prior = baselines(labels[parts.train], y_test, classes, settings.seed)
    score = Score(
        attribute.name, classes, len(parts.train), len(parts.test), epoch=best[1] + 1, select=settings.select
    )
    for name, value in test_figures.items():
        setattr(score, name, value)
    score.majority, score.prior = majority, prior
    return score


def _standardiser(x: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    mean = x.mean(axis=0)
    spread = x.std(axis=0)
    spread[spread < 1e-12] = 1.0
    return mean.astype(np.float32), spread.astype(np.float32)


def attack_all(
    features: Mapping[int, Features],
    attributes: Attributes,
    public: npt.NDArray[np.bool_],
    settings: AiaSettings,
    trainer: Trainer,
) -> dict[str, Any]:
    """Every attribute's :class:`Score` (as dicts; an attribute with too few users is left out),
    and the observer's coverage: how many public and non-public users it has observed."""
    seen = np.array(sorted(features), dtype=np.int64)
    out: dict[str, Any] = {
        "observed": len(seen),
        "public_observed": int(public[seen].sum()) if len(seen) else 0,
        "coverage": len(seen) / len(public) if len(public) else 0.0,
        "select": settings.select,
        "attributes": {},
    }
    for attribute in attributes.items:
        score = attack(features, attribute, public, settings, trainer)
        if score is not None:
            out["attributes"][attribute.name] = score.as_dict()
    return out


class AiaLab:
    """The attribute inference of one run: its users' attributes, who is public, each user's I'_u,
    and the scores of every evaluation round.

    :meth:`evaluate` scores one observer's view of the users' models; the omniscient observer (an
    upper bound, as the MPE attack has) passes every node's current shared model. Features follow
    eq. 7 through the model's own tables (``AttackModel``: GMF's ``user`` and ``item``, PRME's
    ``user_p`` and ``item_p``); a model that does not share its user row (Share less) gives the
    item part alone.
    """

    def __init__(
        self,
        attributes: Attributes,
        settings: AiaSettings,
        trainer: Trainer,
        model: Any,
        positives: Mapping[int, Index] | None,
        top_m: int = 20,
        items: str | None = None,
        user_part: str = "absent",
    ) -> None:
        items = items or ("oracle" if positives is not None else "inferred")
        if items not in ITEMS or user_part not in USER_PARTS:
            raise ValueError(f"items must be one of {ITEMS}, user_part one of {USER_PARTS}")
        if items == "oracle" and positives is None:
            raise ValueError("the oracle I'_u needs every user's positives")
        self.attributes = attributes
        self.settings = settings
        self.trainer = trainer
        self.model = model  #: adversary.models.AttackModel: its tables and scores
        self.positives = positives  #: the oracle I'_u
        self.items = items  #: how I'_u is found (:data:`ITEMS`)
        self.user_part = user_part  #: a model without a user row: nothing, or a fictive e_A
        self.top_m = top_m
        self.public = public_users(len(attributes.items[0].labels), settings.public, settings.seed)
        #: per observer ("omniscient", "server", "node 17"): its evaluations, round by round
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.chosen: dict[str, dict[str, Any]] = {}  #: per observer: the reported round's scores

    def items_of(
        self, user: int, params: Mapping[str, Array], reference: Mapping[str, Array] | None = None
    ) -> Index:
        """I'_u: the oracle's positives, the top-M items by the model's own scores, or the M rows
        that moved most from ``reference``."""
        if self.positives is not None and self.items == "oracle":
            return self.positives[user]
        if self.items == "changed":
            if reference is None:
                raise ValueError("I'_u from the rows that moved needs a reference model")
            return changed_items(params, reference, self.top_m, self.model.item_tables[0])
        if self.model.user_name not in params:
            return np.zeros(0, dtype=np.int64)  # no user row to score with (the config refuses it)
        scores = self.model.relevance(params, self.model.user_of(params), slice(None))
        return inferred_items(scores, self.top_m)

    def feature_of(
        self, user: int, params: Mapping[str, Array], reference: Mapping[str, Array] | None = None
    ) -> Features:
        """Eq. 7's features of ``user``'s model ``params`` (``reference``: for I'_u from the rows
        that moved)."""
        items = self.items_of(user, params, reference)
        part = item_mean(params, items, self.model.item_tables[0])
        if self.model.user_name in params:
            user_row = self.model.user_of(params)
        elif self.user_part == "fictive":
            user_row = self.fictive(user, params, items)
        else:
            return part
        return np.concatenate([user_row, part]).astype(np.float32)

    def fictive(self, user: int, params: Mapping[str, Array], items: Index) -> Array:
        """e_A in place of a user row a model does not share: a user embedding that likes I'_u,
        trained against the model's item side (the CIA's ``fit_user``), from a seeded RNG."""
        width = int(params[self.model.item_tables[0]].shape[1])
        if len(items) == 0:
            return np.zeros(width, dtype=np.float32)
        rng = np.random.default_rng([self.settings.seed, 0xA1A, 5, int(user)])
        e_a = self.model.fit_user(params, np.asarray(items, dtype=np.int64), rng, None)
        return np.asarray(e_a, dtype=np.float32)

    def evaluate(self, round_no: int, models: Mapping[int, Mapping[str, Array]]) -> dict[str, Any]:
        """The omniscient observer's scores from these users' models (I'_u from the rows that
        moved: against the mean of all the models)."""
        return self.score("omniscient", round_no, self.features_of(models))

    def features_of(self, models: Mapping[int, Mapping[str, Array]]) -> dict[int, Features]:
        """Eq. 7's features of these users' models, as the omniscient observer reads them."""
        reference = self.mean_model(models) if self.items == "changed" else None
        return {u: self.feature_of(u, p, reference) for u, p in models.items() if u < len(self.public)}

    def mean_model(self, models: Mapping[int, Mapping[str, Array]]) -> dict[str, Array]:
        """The mean item table of ``models`` (a running sum: one table in memory)."""
        table = self.model.item_tables[0]
        total: npt.NDArray[np.float64] | None = None
        for params in models.values():
            rows = np.asarray(params[table], dtype=np.float64)
            total = rows.copy() if total is None else total + rows
        if total is None:
            return {}
        return {table: (total / len(models)).astype(np.float32)}

    def describe_items(self) -> str:
        """How I'_u was found, as the summary prints it."""
        if self.items == "oracle":
            return "oracle"
        if self.items == "changed":
            return f"changed (the {self.top_m} rows that moved most)"
        return f"inferred (top {self.top_m})"

    def score(self, observer: str, round_no: int, features: Mapping[int, Features]) -> dict[str, Any]:
        """Every attribute's scores from what ``observer`` holds; kept in :attr:`history`."""
        scores = attack_all(features, self.attributes, self.public, self.settings, self.trainer)
        scores["round"] = round_no
        self.history.setdefault(observer, []).append(scores)
        return scores

    def score_chosen(self, observer: str, round_no: int, features: Mapping[int, Features]) -> dict[str, Any]:
        """The scores from what ``observer`` held at round ``round_no``, the round the run
        reports (its early stop's best evaluation): the summary's ``chosen``, not its history."""
        scores = attack_all(features, self.attributes, self.public, self.settings, self.trainer)
        scores["round"] = round_no
        self.chosen[observer] = scores
        return scores

    def summary(self) -> dict[str, Any]:
        """Per observer: its last evaluation, the one of the round the run reports (``chosen``:
        the early stop's best evaluation, else the last), and per attribute its best round (the
        highest AUC or micro-F1)."""
        out: dict[str, Any] = {}
        for observer in self.chosen.keys() - self.history.keys():
            self.history[observer] = [self.chosen[observer]]
        for observer, history in self.history.items():
            best: dict[str, Any] = {}
            for entry in history:
                for name, score in entry["attributes"].items():
                    key = score.get("auc", score.get("micro_f1"))
                    if key is not None and (name not in best or key > best[name]["value"]):
                        best[name] = {"round": entry["round"], "value": key, **score}
            out[observer] = {
                "last": history[-1],
                "chosen": self.chosen.get(observer, history[-1]),
                "best": best,
                "public": self.settings.public,
                "items": self.describe_items(),
                "select": self.settings.select,
            }
        return out


class AttributeObserver:
    """What one observing node keeps for attribute inference: per user whose model it received
    (a gossip model, a client's update at the FedAvg server, a colluding partner's features of
    one), the eq. 7 features (2d values a user; ``featurize``: :meth:`AiaLab.feature_of`).

    - ``momentum`` β: 0 keeps the features of the latest model; above 0 a running mean over the
      models received, v^n = (1 − α_n)·v^{n−1} + α_n·f^n with the CIA's debiased weights (000 eq. 4,
      ``adversary.momentum``). With the oracle I'_u the features are linear in the model, so this
      is eq. 7 of the CIA's momentum model.
    - ``reference``: the model I'_u from the rows that moved is measured against (the FedAvg
      server's global model, a gossip observer's own).
    - ``keep``: False for a colluder that only sends its features to its group's read member
      (:meth:`observe` still returns them); the read member pools what it is sent (:meth:`take`).
    """

    def __init__(
        self,
        featurize: Callable[..., Features],
        momentum: float = 0.0,
        reference: Callable[[], Mapping[str, Array]] | None = None,
        keep: bool = True,
        name: str = "",
    ) -> None:
        if not 0.0 <= momentum < 1.0:
            raise ValueError("the momentum must be in [0, 1)")
        self.featurize = featurize
        self.momentum = momentum
        self.reference = reference
        self.keep = keep
        self.name = name  #: how results name it ("server", "node 17", "colluders 0")
        self.features: dict[int, Features] = {}
        self.counts: dict[int, int] = {}  #: observations folded per user (own and pooled)
        self.pooled = 0  #: features taken from colluding partners

    def observe(self, user: int, params: Mapping[str, Array]) -> Features:
        """Featurize a received model of ``user``, keep it (when this observer keeps), return it."""
        reference = self.reference() if self.reference is not None else None
        f = self.featurize(int(user), params, reference)
        if self.keep:
            self.take(user, f)
        return f

    def take(self, user: int, f: Features, pooled: bool = False) -> None:
        """Fold one observation's features of ``user`` (``pooled``: a partner's)."""
        u = int(user)
        n = self.counts.get(u, 0) + 1
        self.counts[u] = n
        self.pooled += pooled
        old = self.features.get(u)
        if old is None or self.momentum == 0.0 or old.shape != f.shape:
            self.features[u] = np.array(f, dtype=np.float32, copy=True)
            return
        w_old, w_new = weights("debiased", self.momentum, n)
        self.features[u] = (w_old * old + w_new * np.asarray(f, dtype=np.float32)).astype(np.float32)

    def state(self) -> dict[str, Any]:
        return {
            "features": [[u, f.tolist()] for u, f in sorted(self.features.items())],
            "counts": [[u, n] for u, n in sorted(self.counts.items())],
            "pooled": self.pooled,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        self.features = {int(u): np.asarray(f, dtype=np.float32) for u, f in state["features"]}
        self.counts = {int(u): int(n) for u, n in state.get("counts", [[u, 1] for u in self.features])}
        self.pooled = int(state.get("pooled", 0))
