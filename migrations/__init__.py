"""Alembic migrations of the history database (see service/history/models.py).

The folder installs as `dra_mirror.migrations`, its only import path (as `migrations` it
refuses to load).
"""

if __name__ != "dra_mirror.migrations":  # one import path per module (tests/test_import_path.py)
    raise ImportError(
        f"import dra_mirror.migrations, not {__name__}: the folder migrations/ installs as "
        "dra_mirror.migrations (pip install -e .); imported by its folder's name it would load a "
        "second copy of every module"
    )
