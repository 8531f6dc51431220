"""storlab under MPI: one rank per process, launched by the site's mpiexec or srun.

Modules: tree (the binomial tree every exchange follows, healed around gone ranks), comm
(failure-aware collectives, liveness and the doorbell waiting ranks sleep on), ranks (the rank
interface of measure/ranks.py over comm, and `open_ranks`: a command's ranks, local or MPI),
clock (clock offsets between nodes), rewrite (what each rank runs: rank-aware targets, shared
layouts, reorder, stonewall wear-out), aggregate (merging the ranks' results), orchestrator
(running a job or the metadata benchmark on every rank), scaling (the scaling curve of
`storlab scale`). Whether this process is an MPI launch at all is measure/launch.py (no MPI
needed); the human summary is output/mpi_summary.py. Only comm loads mpi4py (ranks loads it
through comm, and only under a launcher); `tree`, `rewrite`, `clock`, `scaling` and `ranks`
import without it; docs/mpi.md is the user guide.
"""
from __future__ import annotations

import os

from ..launch import spinning_defaults

# Before any module of this package imports mpi4py (which starts MPI): where ranks outnumber the
# node's cores, ask MPI to pause while it waits (docs/mpi.md, "More ranks than cores").
os.environ.update(spinning_defaults())
