"""DLIO (MLPerf Storage) workload YAML: the translator into storlab's workload job, and the
built-in workloads (unet3d, resnet50, cosmoflow, llama3 checkpoints) shipped as storlab TOML."""
