"""Command line: ``qclm <command>``. One module per command (``add_parser`` and ``run``); the logic each
command runs lives in the package (config checking, the engine, the probes, the analysis).

No command prints a Python traceback for the input it was given: bad input is an
:class:`~qclm.errors.InputError` (one ``FILE: LOCATION: PROBLEM`` line per problem, exit 2), and so is a missing or
rejected API key or a model the endpoint does not serve (:class:`~qclm.engine.remote.RowProblem`: one line, exit 2),
and a server that refused a request or kept failing after its retries says so in one line naming the request (exit 1);
anything else
that goes wrong is said in one line, ``qclm COMMAND: internal error: ...; the full traceback is in FILE``
(exit 1), with the traceback written to FILE for a bug report (in ``$QCLM_TRACEBACK_DIR``, else the
temporary directory); an error of the machine (a full disk, a permission) is said the same way, without
"internal error"."""

from qclm.commands.cli import COMMANDS, INTERNAL_ERROR, build_parser, kind_commands, main

__all__ = ["COMMANDS", "INTERNAL_ERROR", "build_parser", "kind_commands", "main"]
