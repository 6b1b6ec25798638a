"""Benchmarks: each module is a script (``python benchmarks/NAME.py --help``) that measures one part of the project
on a real model and prints a record (``--json FILE`` writes it); their shared command line is :mod:`qclm.bench`.
A package so that the tests can import one (tests/test_peers.py imports ``benchmarks.peers``)."""
