"""Finding a user's plug-in by name: an entry point or an import path (docs/plugins.md).

A plug-in is named either by an entry point of an installed package, in the group of its kind
(``p2pnode.attacks`` for ``--attack-plugin``, ``p2pnode.merges`` for ``--merge-plugin``,
``p2pnode.models`` for ``--model-plugin``):

    [project.entry-points."p2pnode.attacks"]
    norms = "mylab.attacks:NormWatcher"

or by an import path ``module:attribute`` (``mylab.attacks:NormWatcher``) of a module on
``sys.path`` (``PYTHONPATH``, an installed package) or in the working directory. Every process
of a real run imports it itself, so it must be importable on every host. ``docs/plugins.md``
has a worked example of each kind.
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from p2pcore.plugin import PluginError
from p2pnode.config import ConfigError

#: the entry-point group of each kind of plug-in
GROUPS = {"attack": "p2pnode.attacks", "merge": "p2pnode.merges", "model": "p2pnode.models"}


def load(kind: str, name: str) -> Any:
    """The object the plug-in ``name`` of ``kind`` names; ConfigError (one line) when it cannot
    be found or imported."""
    return _load(kind, name.strip())


def model(name: str) -> Any:
    """The model plug-in ``name``: its object (a class is made with no arguments), once per
    process (θ_0 and every node's learner use the same)."""
    return _model(name.strip())


@cache
def _model(name: str) -> Any:
    found = load("model", name)
    if isinstance(found, type):
        try:
            found = found()
        except Exception as exc:
            raise PluginError(f"model plugin {name}: making it raised {exc!r}") from exc
    for method in ("init", "scores", "update"):
        if not callable(getattr(found, method, None)):
            raise PluginError(f"model plugin {name}: its object has no {method}() (docs/plugins.md)")
    return found


def _import(module_name: str) -> Any:
    """The module, from ``sys.path`` or else from the working directory, as ``python -m``
    would find it (an installed entry point runs ``p2pnode`` with its own folder on the path,
    not the one the user stands in). The working directory goes last: it never shadows an
    installed module."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module_name.partition(".")[0]
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


@cache
def _load(kind: str, name: str) -> Any:
    group = GROUPS[kind]
    flag = f"--{kind}-plugin"
    if not name:
        raise ConfigError(f"{flag}: empty name")
    if ":" not in name:
        found = [ep for ep in entry_points(group=group) if ep.name == name]
        if not found:
            known = sorted(ep.name for ep in entry_points(group=group))
            have = f"installed: {', '.join(known)}" if known else "none installed"
            raise ConfigError(
                f"{flag} {name}: no entry point of that name in group {group} ({have}); "
                "or give an import path module:attribute"
            )
        try:
            return found[0].load()
        except Exception as exc:  # the user's package failed to import: say whose
            raise ConfigError(f"{flag} {name}: loading {found[0].value} failed: {exc!r}") from None
    module_name, _, attribute = name.partition(":")
    try:
        module = _import(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{flag} {name}: no module {exc.name!r} on the Python path") from None
    except Exception as exc:
        raise ConfigError(f"{flag} {name}: importing {module_name} failed: {exc!r}") from None
    target: Any = module
    for part in attribute.split("."):
        if not part or not hasattr(target, part):
            raise ConfigError(f"{flag} {name}: {module_name} has no {attribute!r}")
        target = getattr(target, part)
    return target
