"""No config value reaches a shell unquoted: every placeholder of the workflow's shell commands is quoted (its
rules run scripts today), and a hostile value stays a path."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT, workflow_env, write_workflow_config


#: placeholders allowed bare in shell commands: integers checked by the config schema
BARE_OK = {"params.bootstrap", "params.seed"}


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


def unquoted(commands: list[str]) -> list[str]:
    """The placeholders of ``commands`` that reach the shell unquoted."""
    return [name for cmd in commands for name in re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", cmd)
            if not name.endswith(":q") and name not in BARE_OK]


def test_shell_placeholders_are_quoted():
    """Every placeholder of a workflow shell command is quoted (today the workflow's rules run scripts, and no
    config value reaches a shell: a shell rule added later is held to this). The scan itself is checked on a rule
    written here: it finds its command and the unquoted placeholder in it."""
    sample = 'rule r:\n    shell:\n        "python -m x --out {params.out:q}"\n        " --seed {params.seed} {input}"\n'
    assert shell_commands(sample) == ['"python -m x --out {params.out:q}" " --seed {params.seed} {input}"']
    assert unquoted(shell_commands(sample)) == ["input"]
    commands = []
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]:
        commands += shell_commands(smk.read_text())
    assert unquoted(commands) == [], commands


def test_hostile_config_value_stays_one_path(tmp_path, tiny_llama_dir):
    """A free-text value of the config (the results directory) with shell syntax in it plans the workflow as a
    path: the analysis rule writes under it, and nothing runs it as a command."""
    hostile = "r'; touch PWNED; echo '$(id)"
    config = write_workflow_config(tmp_path, {"m1": tiny_llama_dir}, results=hostile,
                                   analysis={"bootstrap": 10, "seed": 1, "size_classes": [3, 8], "heatmap_item": "S01"})
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(config), "--cores", "1"],
                         capture_output=True, text=True, timeout=300, env=workflow_env())
    assert run.returncode == 0, run.stderr
    assert f"{hostile}/analysis/per_model.csv" in run.stdout + run.stderr  # the Likert analysis, planned under it
    assert not (tmp_path / "PWNED").exists()
