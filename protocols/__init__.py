"""Gossip learning protocols (Base GL, SAMO) as pure state machines."""
