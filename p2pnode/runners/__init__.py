"""Whole runs: nodes built from a configuration, the simulator, real processes, rounds, reports."""
