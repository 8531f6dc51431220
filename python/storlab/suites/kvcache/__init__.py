"""MLPerf Storage v3.0's KV-cache benchmark (`storlab kvcache`, docs/kvcache.md): simulated LLM
inference users whose KV cache spills from emulated GPU and CPU memory tiers to `.npy` files on the
storage under test. users.py draws the users and requests, objects.py writes and reads one object,
tiers.py places them, trial.py runs one trial on one rank, run.py the options, trials and ranks."""
