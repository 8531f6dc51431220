"""Whether this process was started by an MPI launcher, read from the environment only.

Launchers tell each process its rank and the job size through environment variables before MPI
is initialised; reading them lets `storlab run` stay free of mpi4py (and of MPI start-up cost)
when it runs as one plain process. The rank count MPI reports after initialisation is the truth;
this is only the hint that decides whether to initialise it.

Which program started the ranks (`srun` or an `mpiexec`) is recorded in every result, with the
Slurm job and step, so a result can be traced back to its batch job (docs/mpi.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["Launch", "detect", "launcher_name", "launch_environment", "local_ranks", "spinning_defaults"]


@dataclass(frozen=True)
class Launch:
    source: str          # which variables said so: pmi, openmpi, slurm, hydra-local
    size: int            # ranks in the job, as the launcher announced them
    rank: int | None     # this process's rank, when the launcher tells it
    launcher: str = "mpiexec"   # the program that started the ranks: srun or mpiexec (launcher_name)


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


# Variables only an mpiexec's own process manager sets in its ranks: MPICH/Intel MPI hydra's proxy
# (also when hydra itself starts its proxies through srun inside an allocation), Open MPI's mpirun.
_MPIEXEC_MARKS = ("HYDI_CONTROL_FD", "MPI_LOCALNRANKS", "OMPI_MCA_orte_hnp_uri", "PRTE_LAUNCHED")


def _in_srun_step(env: Mapping[str, str]) -> bool:
    return "SLURM_PROCID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env)


def detect(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch this process is part of, when it has more than one rank; else None."""
    env = os.environ if environ is None else environ
    for source, size_var, rank_var in _SOURCES:
        size = _int(env, size_var)
        if size is None or size < 2:
            continue
        rank = _int(env, rank_var)
        if source == "slurm" and (rank is None or not _in_srun_step(env)):
            continue
        return Launch(source, size, rank, launcher_name(env, size, rank) or "mpiexec")
    return None


def launcher_name(environ: Mapping[str, str] | None = None, size: int | None = None,
                  rank: int | None = None) -> str | None:
    """`srun` when this process is a task of an srun step that is itself the MPI job (srun
    --mpi=pmi2/pmix sets PMI_* too, so those alone cannot tell), `mpiexec` for any other launcher,
    None for a plain process. An mpiexec inside an allocation may start its helpers with srun; its
    ranks are then tasks of a step too, but carry its own marks, or a rank or size other than the
    step's task number and count."""
    env = os.environ if environ is None else environ
    if _in_srun_step(env) and not any(m in env for m in _MPIEXEC_MARKS):
        step_size = _int(env, "SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_NTASKS")
        if (size is None or size == step_size) and (rank is None or rank == _int(env, "SLURM_PROCID")):
            return "srun"
    if any(m in env for m in _MPIEXEC_MARKS) or any(s in env for _, s, _ in _SOURCES[:2]):
        return "mpiexec"
    return None


def launch_environment(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The `environment` keys of every result about how this process was started: `launcher`
    (srun, mpiexec or None), and the Slurm job and step it ran in (also set in a batch script
    outside srun, where the launcher is None)."""
    env = os.environ if environ is None else environ
    return {
        "launcher": launcher_name(env),
        "slurm_job_id": env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"),
        "slurm_step_id": env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID"),
    }


def local_ranks(environ: Mapping[str, str] | None = None) -> int | None:
    """Ranks of this job on this node, as the launcher announces them (hydra's MPI_LOCALNRANKS,
    Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, the first count of Slurm's SLURM_STEP_TASKS_PER_NODE)."""
    env = os.environ if environ is None else environ
    for name in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        n = _int(env, name)
        if n is not None:
            return n
    first = env.get("SLURM_STEP_TASKS_PER_NODE", "").split(",")[0].split("(")[0]
    return int(first) if first.isdigit() else None


# MPICH: while it waits inside MPI, sleep now and then instead of spinning without pause.
SPIN_DEFAULTS = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1"}


def spinning_defaults(environ: Mapping[str, str] | None = None, cores: int | None = None) -> dict[str, str]:
    """MPI settings to add before MPI starts when this node has more ranks than cores (none of
    them set already): MPI's own blocking calls (initialisation, communicator set-up) spin, and
    a spinning rank takes the core a rank still starting needs. storlab's own waits never block
    in MPI (comm.py)."""
    env = os.environ if environ is None else environ
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = local_ranks(env)
    if n is None or n <= cores:
        return {}
    return {k: v for k, v in SPIN_DEFAULTS.items() if k not in env}
