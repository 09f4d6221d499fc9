"""Data loaders: mini-batches of ids sampled into blocks, in the trainer or in forked sampler processes."""
