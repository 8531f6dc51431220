"""storlab under MPI: one rank per process, launched by the site's mpiexec or srun.

Modules: launch (is this an MPI launch? from the environment, without importing MPI), comm
(failure-aware collectives and liveness), clock (clock offsets between nodes), rewrite (what each
rank runs: rank-aware targets, shared layouts, reorder, stonewall wear-out), aggregate (merging
the ranks' results), orchestrator (running a job on every rank), meta (running `storlab meta` on
every rank), render (the human summary).
Only `launch`, `rewrite` and `aggregate` import without mpi4py; docs/mpi.md is the user guide.
"""
