"""State stores: the in-memory store (embedded default) and, later, Redis; see protocols.py."""
