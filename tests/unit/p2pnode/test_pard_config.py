"""`--defence pard` and its settings: refused where PARD is not built or would be misread, and
runs without it keep the keys they had."""

from __future__ import annotations

import pytest

from p2plab.experiment_spec import run_key
from p2pnode.config import ConfigError, RunConfig


def _pard(**more: object) -> RunConfig:
    return RunConfig(nodes=20, model="ncf").replace(**{"learning.defence": "pard", **more})


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        ({"model": "prme"}, "defence"),
        ({"learning.share_less": True}, "defence"),
        ({"learning.dp_noise": 1.0}, "defence"),
        ({"attack.kind": "cia", "protocol": "fedavg"}, "defence"),
        ({"attack.kind": "aia", "attack.aia_public": 0.3}, "public-share"),
        ({"attack.kind": "aia", "attack.aia_items": "inferred"}, "aia-items"),
    ],
)
def test_pard_is_refused_where_it_is_not_built(settings: dict[str, object], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        _pard(**settings).validate()


def test_pard_settings_key_their_runs() -> None:
    """(Its flags without --defence pard are refused: tests/unit/p2pnode/test_config_cli.py.)"""
    _pard(**{"attack.kind": "aia"}).validate()
    plain = RunConfig(nodes=20, model="ncf")
    assert run_key(plain, "simulate") != run_key(_pard(), "simulate")
    assert run_key(_pard(), "simulate") != run_key(_pard(**{"learning.pard_lambda_ir": 0.9}), "simulate")


def test_the_baselines_settings_key_their_runs_and_leave_older_keys_alone() -> None:
    plain = RunConfig(nodes=20, model="ncf")
    uc = RunConfig(nodes=20, model="ncf").replace(**{"learning.defence": "uc-fedrec"})
    uc.validate()
    noisy = plain.replace(**{"learning.upload_noise": 0.017})
    stopped = plain.replace(stop_at=0.5)
    keys = {run_key(c, "simulate") for c in (plain, uc, _pard(), noisy, stopped)}
    assert len(keys) == 5
    with pytest.raises(ConfigError, match="upload-noise"):
        plain.replace(**{"learning.upload_noise": -1.0}).validate()
    with pytest.raises(ConfigError, match="stop-at"):
        plain.replace(stop_at=1.5).validate()
