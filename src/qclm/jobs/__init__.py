"""The workflow's jobs: the per-model scoring job (weights loaded once; every probe cell of that model, with a
cell cache), its GPU binding, and the CPU stages after it (per-cell tables, collection across models)."""
