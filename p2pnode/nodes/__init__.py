"""The nodes: a run's prepared data, the node driver, a process's host and intake, the KNN service."""
