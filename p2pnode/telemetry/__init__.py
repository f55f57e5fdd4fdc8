"""What a process counts and exports: its Prometheus metrics and the exposure of each user's data."""
