"""Attacks on gossip learning (Community Inference Attack, MIA) — arrive with issue #4."""
