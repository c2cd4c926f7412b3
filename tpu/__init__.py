"""Training on TPUs, GPUs or a CPU through one code path: strategy, data sources, input pipelines."""
