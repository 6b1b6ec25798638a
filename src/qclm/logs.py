"""Logging for every entry point (commands, workflow scripts), in one place."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: the loggers of the HTTP clients under the ``openai`` client (httpx; httpx2 from openai 3 on) and of the API
#: backends' retries: a line per request or retry, in a job's log file, not on a terminal
HTTP_LOGGERS = ("httpx", "httpx2", "qclm.engine.retries")


def configure_logging(log_file: str | None = None, level: int = logging.INFO, announce: bool = False) -> None:
    """Log to a file (workflow jobs: ``snakemake.log[0]``) or to stderr, with timestamps. With a file, stderr
    goes there too: progress bars, warnings and tracebacks land in the job's log. Called again in the same
    process (tests, notebooks), the handler follows the current ``sys.stderr`` (an old one, whose stream may be
    closed by now, is replaced, not flushed). ``announce``: a long job (scoring, fine-tuning) first says on the
    terminal where its log is (its progress bars, warnings and errors go there)."""
    if log_file and announce:  # one line on the terminal naming the job's log
        print(f"qclm: this job's log (progress, warnings, errors): {log_file}", file=sys.stderr, flush=True)
    if log_file:
        sys.stderr = open(log_file, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the job
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_qclm", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler._qclm = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("fontTools").setLevel(logging.WARNING)  # matplotlib's PDF font subsetting, line by line
    # the HTTP client logs every request at INFO: in a job's log file, not on a terminal (thousands of lines a cell)
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if log_file else logging.WARNING)
    logging.captureWarnings(True)


def formatter() -> logging.Formatter:
    """The formatter of every qclm log line (per-cell log files of a scoring job use it too)."""
    return logging.Formatter(FORMAT)
