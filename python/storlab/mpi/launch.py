"""Whether this process was started by an MPI launcher, read from the environment only.

Launchers tell each process its rank and the job size through environment variables before MPI
is initialised; reading them lets `storlab run` stay free of mpi4py (and of MPI start-up cost)
when it runs as one plain process. The rank count MPI reports after initialisation is the truth;
this is only the hint that decides whether to initialise it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["Launch", "detect"]


@dataclass(frozen=True)
class Launch:
    launcher: str        # which variables said so: pmi, openmpi, slurm, hydra-local
    size: int            # ranks in the job, as the launcher announced them
    rank: int | None     # this process's rank, when the launcher tells it


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


# (launcher, size variable, rank variable), most specific first. PMI_* come from MPICH's hydra,
# Intel MPI and srun --mpi=pmi2; OMPI_* from Open MPI's mpirun; SLURM_* from srun (SLURM_NTASKS
# alone is also set in a batch script outside srun, so SLURM_PROCID must be there too and
# SLURM_STEP_ID must name a step); MPI_LOCALNRANKS is hydra's ranks-on-this-node, a last resort.
_SOURCES = (
    ("pmi", "PMI_SIZE", "PMI_RANK"),
    ("openmpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("slurm", "SLURM_NTASKS", "SLURM_PROCID"),
    ("hydra-local", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"),
)


def detect(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch this process is part of, when it has more than one rank; else None."""
    env = os.environ if environ is None else environ
    for launcher, size_var, rank_var in _SOURCES:
        size = _int(env, size_var)
        if size is None or size < 2:
            continue
        rank = _int(env, rank_var)
        if launcher == "slurm" and (rank is None or "SLURM_STEP_ID" not in env and "SLURM_STEPID" not in env):
            continue
        return Launch(launcher, size, rank)
    return None
