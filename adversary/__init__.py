"""Attacks on what gossip and federated learning share: the Community Inference Attack (000),
membership inference (002's MPE) and attribute inference (004), as pure observers of what an
adversary node receives."""
