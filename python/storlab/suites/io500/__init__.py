"""The IO500 benchmark on storlab's engine (io500 02091cf): io500's phases in its order with its
stonewall and wear-out, its parallel find, its score and its validity rules.

run.py is the entry (`run(translation, ranks, progress)`); phases.py joins io500's phase table
(jobs/io500/phases.py) with each phase's code, by family: ior.py, mdtest.py, mdworkbench.py (md-workbench's
three phases), find.py (and the timestamp); score.py scores and judges; folders.py checks, makes and empties the folders;
engine.py starts and waits for the engine runs as every benchmark does; state.py is what a
rank's run carries from phase to phase. concurrent.py runs io500's proposed concurrent phase (and
the ior-rnd1MB-write it reads from) in extended mode, reported apart from io500's phases and score.
"""
