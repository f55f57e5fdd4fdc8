"""The contract between the pure state machines and the shell that runs them: node ids and effects.

Peer samplers, protocols and adversaries return these effects; only ``p2pnode`` carries them out.
Nothing here imports anything but the standard library.
"""
