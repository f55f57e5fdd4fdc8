"""p2pnode: the I/O shell — CLI, config, node driver, transports, clocks, wire, metrics, simulator."""

import os

# Node work is many small matrix products; a second OpenBLAS thread on a shared core only adds
# hand-offs (a 943-node simulation trained in 2.98 s with two threads vs 2.32 s with one). Set
# before numpy is first imported; a value the user exported wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
