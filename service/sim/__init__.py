"""The simulated Kubernetes API server (`dra-mirror sim`): the demo's clusters, the tests' and
the benchmarks'.

Two halves: the API server (storage and registry, discovery, LIST/WATCH/CRUD, conversion,
validation, Tables, faults; `server`, `resource_verbs`, `store`, `storage` …) and the world
(scenario files, GPU profiles, the scheduler, claim controller and kubelet emulation, churn,
generated big clusters; `scenario`, `hardware`, `controller`, `scheduler`, `generate` …).
See docs/simulator.md and service/sim/README.md.

Promises: depends on nothing of the mirror but the model and the pure diagnostics
(import-linter checks it); deterministic for a scenario's seed.
"""
