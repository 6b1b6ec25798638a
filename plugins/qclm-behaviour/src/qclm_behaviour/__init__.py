"""qclm-behaviour: what a language model does in three behavioural tasks (a two-armed bandit, interpretation
bias, risk), read from the log-probabilities of their options, as a qclm probe kind (``kind: behaviour``) built on
qclm's public plug-in API alone (:mod:`qclm.plugin`). Installed, it registers the kind under the entry point group
``qclm.kinds`` (pyproject.toml); qclm's docs/validity.md says what it is for."""

from qclm_behaviour.kind import BehaviourProbe

KIND = BehaviourProbe

__all__ = ["BehaviourProbe", "KIND"]
