"""Peer sampling: static k-regular views, PeerSwap dynamic views, Cyclon shuffle. Pure state machines."""
