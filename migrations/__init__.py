"""Alembic migrations of the history database (see service/history/models.py)."""
