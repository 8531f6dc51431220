"""Measurement: the local runner, the metadata benchmark, sweeps, passes, cache control and MPI."""
