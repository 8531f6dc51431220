"""The workload suites: IO500 (io500/), AI training and checkpoints (training/) and Darshan replays
(replay.py). Each reads the job its translator made (jobs/io500, jobs/dlio, jobs/darshan), drives
the engine benchmarks of measure/ through one rank interface (measure/ranks.py) and returns one
result document; the CLI emits it like any other (output/emit.py)."""
