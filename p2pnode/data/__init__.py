"""What a process keeps on disk: datasets and tables, checkpoints, the DP noise cache, atomic writes."""
