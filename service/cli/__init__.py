"""`dra-mirror`, the command line (click): `main` is the group every command is registered on.

* `main`        — the group and the commands that run the mirror (serve, watch, sim, migrate,
  schema);
* `demo`        — `dra-mirror demo`: the simulator and the mirror in one process;
* `client`      — who-holds / free / waiting / idle against a running server;
* `diagnostics` — explain / lint.
"""
