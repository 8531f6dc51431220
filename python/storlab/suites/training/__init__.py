"""AI training and checkpoint I/O as MLPerf Storage and DLIO measure it: the dataset and its file
formats, the training loop's reader, checkpoints, and the run that ties them together."""
