"""CPU stages never import torch: the modules every CPU-side workflow script imports, the CPU stages themselves run
on a real run's tables, the config check (`qclm validate`) and what Snakemake imports to build the DAG, each in a
process where importing torch fails."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from conftest import ROOT, workflow_env

#: the workflow's scripts that run on the CPU only (score_model.py, prepare_model.py and finetune.py load weights)
CPU_SCRIPTS = ("cell_tables.py", "collect.py", "analyze_probe.py", "analyze_interventions.py")
#: any `import torch` in the process raises ImportError (a finder ahead of all others; nothing in sys.modules, so
#: libraries that look for torch there, as scipy does, see no torch)
BLOCK = """import sys
class _BlockTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch imported by a CPU stage")
sys.meta_path.insert(0, _BlockTorch())
"""


def run_blocked(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True,
                          env=workflow_env(), timeout=timeout, cwd=ROOT)


def script_imports(name: str) -> list[str]:
    tree = ast.parse((ROOT / "workflow" / "scripts" / name).read_text())
    return [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]


def test_the_blocker_blocks():
    """The check can fail: a module that imports torch is caught."""
    run = run_blocked("import qclm.engine.scorers")
    assert run.returncode != 0 and "torch" in run.stderr


@pytest.mark.parametrize("script", CPU_SCRIPTS)
def test_cpu_scripts_import_no_torch(script):
    modules = script_imports(script)
    assert any(m.startswith("qclm") for m in modules), modules
    run = run_blocked("".join(f"import {m}\n" for m in modules) + "assert 'torch' not in sys.modules\n")
    assert run.returncode == 0, run.stderr[-2000:]


def test_validation_imports_no_torch():
    run = run_blocked("from qclm.validation import validate_config_file\n"
                      "assert validate_config_file('config/config.yaml') == []\n"
                      "from qclm.commands import main\n"
                      "assert main(['validate', '--config', 'config/config.yaml']) == 0\n")
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_server_backends_import_no_torch():
    """A scoring job of an API row needs no torch: the server backends and their client import none."""
    run = run_blocked("import qclm.engine.vllm, qclm.engine.openai_api, qclm.engine.remote, qclm.engine.capabilities\n"
                      "assert 'torch' not in sys.modules\n")
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.slow
def test_cpu_stages_and_the_dag_run_without_torch(shared_run, tmp_path):
    """The CPU stages of every probe kind of the shared run, run again on its tables, and a dry run of the
    workflow (the DAG), all with torch unimportable."""
    res = shared_run.results
    code = f"""
from pathlib import Path
from qclm import probes, settings
from qclm.inputs import read_yaml
from qclm.jobs import stages
from qclm.models.table import load_model_table
config = read_yaml({str(shared_run.config)!r})
res, out = Path({str(res)!r}), Path({str(tmp_path)!r})
instances = {{i.id: i for i in probes.instances(config)}}
models = load_model_table(config["models"])
for ident in ("stai_s", "yesno", "gad7_ent", "csi"):
    inst = instances[ident]
    cls = probes.kind_class(inst.kind)
    cells = {{}}
    for model in models:
        for cond in config["conditions"]:
            files = {{"raw": res / "logprobs" / model / ident / f"{{cond}}.parquet"}}
            for t in cls.cell_tables:
                files[t] = out / model / ident / f"{{cond}}.{{t}}.parquet"
                stages.cell_tables(inst, files["raw"], cls.stage_config(config), {{t: str(files[t])}})
            cells[(model, ident, cond)] = files
    info = stages.model_info(models, [f["raw"] for f in cells.values()])
    tables = {{n: out / ident / p for n, p in cls.score_tables.items()}}
    stages.collect(inst.kind, [inst], cells, info, cls.stage_config(config), {{k: str(v) for k, v in tables.items()}})
    (out / ident / "analysis").mkdir(parents=True, exist_ok=True)
    assert cls.analyze(tables, out / ident / "analysis", {{**config, **cls.stage_config(config)}})
assert 'torch' not in sys.modules
from snakemake.cli import main
sys.argv = ["snakemake", "-n", "-s", {str(ROOT / "Snakefile")!r}, "--directory", {str(shared_run.workdir)!r},
            "--cores", "1", "--configfile", {str(shared_run.config)!r}, "--replace-workflow-config"]
main()
"""
    run = run_blocked(code, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "Nothing to be done" in run.stdout + run.stderr
    assert (tmp_path / "stai_s" / "analysis" / "per_model_state_trait.csv").exists()
    assert (tmp_path / "yesno" / "analysis" / "yesno_state_trait.csv").exists()
    assert (tmp_path / "gad7_ent" / "analysis" / "entailment.csv").exists()
    assert (tmp_path / "csi" / "analysis" / "csi_scores.csv").exists()
