"""The fused fictive user (adversary/fictive_fused.py) against the numpy path it compiles."""

from __future__ import annotations

import numpy as np

from adversary.cia import CIAObserver
from adversary.models import GMFAttack
from learning import gmf

N, D = 120, 16


def reference_model(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        gmf.ITEM: rng.normal(0, 0.5, (N, D)).astype(np.float32),
        gmf.H: rng.normal(0, 1, D).astype(np.float32),
        gmf.B: np.array([0.1], np.float32),
    }


def targets() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [np.sort(rng.choice(N, size, replace=False)) for size in (3, 10, 7, 1, 20)]


def models(fused: bool) -> GMFAttack:
    model = GMFAttack()
    model.fused = fused
    return model


def test_fitting_every_target_at_once_is_the_numpy_loop() -> None:
    """The same examples (the same calls on the generator) and the same Adam steps, from zeros
    and then warm-started from the previous e_A, to float32 precision."""
    ref = reference_model(1)
    refs = {}
    for fused in (False, True):
        rng = np.random.default_rng(9)
        first = models(fused).fit_users(ref, targets(), rng, None)
        again = models(fused).fit_users(ref, targets(), rng, first)
        refs[fused] = (first, again, rng.random())
    (a1, a2, a_next), (b1, b2, b_next) = refs[False], refs[True]
    assert a_next == b_next  # the generator was left where the numpy path leaves it
    assert b1.dtype == np.float32 and b1.shape == (5, D)
    assert np.abs(a1).max() > 0.5 and np.abs(a2 - a1).max() > 0.01  # they did train, and again
    np.testing.assert_allclose(b1, a1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b2, a2, rtol=1e-4, atol=1e-5)


def test_an_observer_scores_every_model_as_the_numpy_path_does() -> None:
    ref = reference_model(2)
    rng = np.random.default_rng(4)
    updates = []
    for _ in range(12):
        m = {k: v.copy() for k, v in ref.items()}
        m[gmf.ITEM] += rng.normal(0, 0.3, (N, D)).astype(np.float32)
        updates.append(m)
    observers = {}
    for fused in (False, True):
        obs = CIAObserver(models(fused), targets(), k=3, momentum=0.5, fictive_user=True)
        obs.set_reference(ref, np.random.default_rng(1))
        for u, m in enumerate(updates):
            obs.observe(u % 7, m)
        observers[fused] = obs
    plain, fused_obs = observers[False], observers[True]
    assert plain.scores.keys() == fused_obs.scores.keys()
    for u, s in plain.scores.items():
        np.testing.assert_allclose(fused_obs.scores[u], s, rtol=1e-5)
    assert plain.predict().users == fused_obs.predict().users


def test_the_numpy_path_is_untouched_by_the_flag_default() -> None:
    """``fused`` is off unless asked for: the observer then never calls the compiled scorer."""
    model = GMFAttack()
    ref = reference_model(3)
    assert (
        model.fictive_means(ref, np.zeros((5, D), np.float32), np.arange(3), np.arange(1), np.ones(1)) is None
    )
