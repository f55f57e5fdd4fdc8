"""Transports that move frames between nodes: in-memory (simulator) and HTTP (real runs)."""
