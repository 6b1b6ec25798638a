"""Probes: every measurement qclm makes is a probe kind (docs/probes.md)."""
