"""p2pnode: a gossip-learning node daemon for decentralized recommenders, and its simulator.

From Python::

    from p2pnode.config import RunConfig
    from p2pnode.sim import simulate

    result = simulate(RunConfig(nodes=100, rounds=10).replace(**{"learning.lr": 0.01,
                                                               "attack.kind": "cia"}))
    result["hit_ratio_at_20"]        # mean HR@20 over the nodes after the last round
    result["history"]                # one dict per evaluated round (the same as result.json)
    result["cia"]["max_aac"]         # the attack's Max AAC, with its upper and random bounds

``RunConfig`` holds every setting the command line has (``p2pnode simulate --help`` lists them,
with their defaults); ``RunConfig.replace`` takes nested fields as ``"learning.lr"``. ``simulate``
runs the network in this process on a virtual clock; ``p2pnode.sim.Simulation`` steps it round
by round (``run_round``) for finer control. Real processes over HTTP: ``p2plab.launch.launch`` (what
``p2pnode launch`` runs) and ``p2pnode.real.run_process`` (one ``p2pnode run`` process).
Experiments: ``p2plab.experiment.run_experiment``.

The package is the daemon's I/O shell (config, node driver, transports, clocks, wire, metrics,
simulator); the pure protocols, samplers, attacks and models live in ``protocols``,
``peer_sampling``, ``adversary`` and ``learning``.
"""

import os

# Node work is many small matrix products; a second OpenBLAS thread on a shared core only adds
# hand-offs (a 943-node simulation trained in 2.98 s with two threads vs 2.32 s with one). Set
# before numpy is first imported; a value the user exported wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
