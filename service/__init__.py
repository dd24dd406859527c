"""dra-mirror, the service: from the Kubernetes API of many clusters to one GraphQL graph.

The packages and how data flows through them: docs/architecture.md. The folder installs as
`dra_mirror.service`, its only import path: imported as `service` (from the repository's root)
it refuses to load, so no module can exist twice in one process.
"""

if __name__ != "dra_mirror.service":  # one import path per module (tests/test_import_path.py)
    raise ImportError(
        f"import dra_mirror.service, not {__name__}: the folder service/ installs as "
        "dra_mirror.service (pip install -e .); imported by its folder's name it would load a "
        "second copy of every module"
    )
