"""Recommendation learning: interactions, splits, negative sampling, GMF, local training, utility."""
