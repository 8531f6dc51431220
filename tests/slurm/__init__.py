"""storlab under Slurm's srun: a one-node Slurm started for the session (cluster.py, conftest.py)."""
