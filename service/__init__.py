"""dra-mirror, the service: from the Kubernetes API of many clusters to one GraphQL graph.

The packages and how data flows through them: docs/architecture.md.
"""
