"""Whom a process trusts, and how far: authentication, identities, TLS, load limits, swap judging."""
