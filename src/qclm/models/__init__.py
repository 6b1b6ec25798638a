"""Models: the model table and embedded models (:mod:`qclm.models.table`, light, read while the workflow builds
its DAG) and preparing and loading weights (:mod:`qclm.models.loading`, torch)."""
