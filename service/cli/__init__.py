"""`dra-mirror`, the command line (click): `main.main` is the group every command is registered on.

* `main`        — the group; `serve`, `watch` and `demo`, which run the mirror;
* `options`     — settings at the edge: the shared flags over `DRA_MIRROR_*` variables;
* `running`     — `run`: a command's coroutine until done, Ctrl-C or SIGTERM (exit 0);
* `demo`        — `dra-mirror demo`: the simulator and the mirror in one process;
* `simulator`   — `dra-mirror sim`: simulated clusters kubectl can use;
* `database`    — `dra-mirror migrate`: the history database at the newest schema;
* `sdl`         — `dra-mirror schema`: the printed GraphQL contract;
* `client`      — who-holds / free / waiting / idle against a running server;
* `diagnostics` — explain / lint.
"""
