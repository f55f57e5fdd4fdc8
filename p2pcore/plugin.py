"""The error a user's plug-in raises through (``--attack-plugin``, ``--merge-plugin``)."""

from __future__ import annotations


class PluginError(RuntimeError):
    """A plug-in's own code failed: the message names the plug-in and what it was doing, and the
    plug-in's exception is the cause (``raise ... from``), so its traceback can be shown."""
