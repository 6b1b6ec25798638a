"""No config value reaches a shell unquoted: every placeholder of the workflow's shell commands is quoted, and a
hostile value stays one shell word."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from conftest import ROOT, write_workflow_config


#: placeholders allowed bare in shell commands: integers checked by the config schema, and a
#: parameter that the rule builds with shlex.quote
BARE_OK = {"params.bootstrap", "params.seed", "params.heatmap"}


def shell_commands(text: str) -> list[str]:
    """The raw text of each rule's `shell:` command (the string literals on the lines after it)."""
    commands, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\s+shell:\s*(#.*)?$", line):
            parts = []
            for following in lines[i + 1:]:
                if not re.match(r"[rfRF]*[\"']", following.strip()):
                    break
                parts.append(following.strip())
            commands.append(" ".join(parts))
        elif m := re.match(r"\s+shell:\s*(\S.*)$", line):
            commands.append(m.group(1))
    return commands


def test_shell_placeholders_are_quoted():
    commands = []
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]:
        commands += shell_commands(smk.read_text())
    assert commands, "no shell commands found: the scan is broken"
    for cmd in commands:
        for name in re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", cmd):
            assert name.endswith(":q") or name in BARE_OK, f"unquoted {{{name}}} in shell command: {cmd}"


def test_hostile_config_value_stays_one_shell_word(tmp_path, tiny_llama_dir):
    """A free-text value of the config (the results directory: the heatmap item, once free text, must now be an
    item the run scores) reaches the analysis command as one shell word."""
    hostile = "r'; touch PWNED; echo '$(id)"
    config = write_workflow_config(tmp_path, {"m1": tiny_llama_dir}, results=hostile,
                                   analysis={"bootstrap": 10, "seed": 1, "size_classes": [3, 8], "heatmap_item": "S01"})
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(config), "--cores", "1"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    [cmd] = [line for line in (run.stdout + run.stderr).splitlines() if " -m qclm.commands analyze " in line]
    words = shlex.split(cmd)
    assert words[words.index("--out") + 1] == f"{hostile}/analysis"
    assert words[words.index("--heatmap-item") + 1] == "S01"
    assert not (tmp_path / "PWNED").exists()
