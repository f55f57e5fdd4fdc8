"""p2pnode: the I/O shell — CLI, config, node driver, transports, clocks, wire, metrics, simulator."""

__version__ = "0.1.0"
