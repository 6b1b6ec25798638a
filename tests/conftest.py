"""Shared fixtures: tokenizers of the two embedded models (byte-level BPE without BOS, and
SentencePiece with BOS), tiny random models built on them, the real embedded SmolLM2, and a
helper that writes a workflow config for a temporary directory."""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import settings as hypothesis_settings

# property tests draw the same examples on every run (a CI run must not pass or fail by the draw); a failure
# found once is found again, and the draws do not depend on a database left by an earlier run
hypothesis_settings.register_profile("qclm", derandomize=True, database=None)
hypothesis_settings.load_profile("qclm")

ROOT = Path(__file__).resolve().parents[1]
# the analysis tests' synthetic tables and `qclm analyze` runs, built once per session
pytest_plugins = ("analysis_fixtures",)
CACHE = Path(os.environ.get("QCLM_TEST_CACHE", ROOT / ".cache" / "tests"))


def _session_qclm_cache() -> Path:
    """qclm's cache (:mod:`qclm.cache`) for this session, never the user's own: prepared models persist in
    .cache/tests/models like the other builds; the server backends' answers are the session's alone (a test that
    counts the requests a server gets must not find them answered by an earlier session)."""
    import atexit
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="qclm-test-cache-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (CACHE / "models").mkdir(parents=True, exist_ok=True)
    (root / "models").symlink_to(CACHE / "models", target_is_directory=True)
    return root


os.environ["QCLM_CACHE"] = str(_session_qclm_cache())


def _cached(name: str, build) -> Path:
    """Build once into .cache/tests/NAME (atomic rename), reuse across test sessions."""
    out = CACHE / name
    if not (out / "done").exists():
        tmp = CACHE / f"{name}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        build(tmp)
        (tmp / "done").write_text("ok")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


def _gguf_tokenizer(model_name: str, out: Path) -> None:
    from transformers import AutoTokenizer

    from qclm.models.table import gguf_path, parse_model_row

    row = {"name": model_name, "source": f"embedded:{model_name}", "revision": "", "params_b": "0.1",
           "type": "base", "family": "x", "dtype": "float32"}
    gguf = gguf_path(parse_model_row(row, "test", 0), CACHE / "_gguf")
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(out)


@pytest.fixture(scope="session")
def smollm2_tokenizer_dir() -> Path:
    return _cached("tok-smollm2", lambda d: _gguf_tokenizer("smollm2-135m-instruct", d))


@pytest.fixture(scope="session")
def gemma3_tokenizer_dir() -> Path:
    return _cached("tok-gemma3", lambda d: _gguf_tokenizer("gemma3-270m", d))


#: the tiny Llamas' sizes: ``llama`` (head_dim 16) for the engine's tests; ``llama-vllm`` (head_dim 64) for the vLLM
#: server's, whose CPU attention needs head_dim 32, 64, 80...
TINY_LLAMAS = {
    "llama": {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2},
    "llama-vllm": {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1},
}


def _tiny(kind: str, tok_dir: Path, out: Path) -> None:
    import torch
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tok_dir)
    torch.manual_seed(0)
    if kind in TINY_LLAMAS:
        cfg = LlamaConfig(vocab_size=len(tok), **TINY_LLAMAS[kind], num_hidden_layers=2, max_position_embeddings=2048,
                          tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        model = LlamaForCausalLM(cfg)
    else:
        # a sliding window of 8 tokens, far shorter than the prompts, exercises the window masks
        cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                               layer_types=["sliding_attention", "full_attention"], max_position_embeddings=2048,
                               bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id)
        model = Gemma3ForCausalLM(cfg)
    # random weights with a wider spread make log-probs differ clearly between tokens
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
    model.save_pretrained(out)
    tok.save_pretrained(out)


@pytest.fixture(scope="session")
def tiny_llama_dir(smollm2_tokenizer_dir) -> Path:
    return _cached("tiny-llama", lambda d: _tiny("llama", smollm2_tokenizer_dir, d))


@pytest.fixture(scope="session")
def tiny_gemma_dir(gemma3_tokenizer_dir) -> Path:
    return _cached("tiny-gemma3", lambda d: _tiny("gemma3", gemma3_tokenizer_dir, d))


@functools.cache
def shared_tokenizer(path: Path):
    """The tokenizer of a model directory, loaded once per session and shared: Gemma's (262k entries) takes over
    2 s to load, and nothing in the package changes a causal model's tokenizer. A test that changes one (a chat
    template) loads its own."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_dir(path: Path):
    """A fresh model of a directory (tests change weights) with its shared tokenizer."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).eval(), shared_tokenizer(Path(path))


@pytest.fixture(scope="session")
def smollm2_prepared_dir() -> Path:
    """The real embedded SmolLM2-135M-Instruct, de-quantized once to safetensors."""
    from qclm.models.loading import prepare_model
    from qclm.models.table import parse_model_row

    row = {"name": "smollm2-135m-instruct", "source": "embedded:smollm2-135m-instruct", "revision": "Q4_1",
           "params_b": "0.135", "type": "instruct", "family": "smollm2", "dtype": "float32"}

    def build(d: Path) -> None:
        prepare_model(parse_model_row(row, "test", 0), d / "model")

    return _cached("real-smollm2", build) / "model"


def likert_cell(path, condition: str = "vanilla", stimuli=(), templates=None):
    """A scoring-job cell of a Likert questionnaire file under a condition (stimulus files in class order);
    ``templates``: the config's templates.score (None: its default)."""
    from qclm.jobs.score_model import CellSpec

    return CellSpec(Path(path).stem, "likert", condition, {"questionnaire": str(path)}, (str(path),),
                    tuple(str(s) for s in stimuli),
                    config={} if templates is None else {"templates": {"score": templates}})


def loaded_model(spec, model, tokenizer, engine: dict | None = None, provenance: dict | None = None):
    """A model as a scoring job holds it (backend and prompt builder of its prompt format)."""
    from qclm.jobs.backends import Loaded

    return Loaded(spec, model, tokenizer, provenance or {}, engine or {})


def likert_requests(builder, q, ictx, boundary: str = "error"):
    """The token requests of every variant of one Likert context (qclm.probes.likert.kind.item_contexts), built
    through the prompt builder as a scoring job builds them."""
    from qclm.engine.requests import tokenize_requests

    texts, continuations = builder.build(ictx.stimulus, ictx.variants)
    return tokenize_requests(builder.tokenizer, texts, continuations, boundary)


MODEL_TABLE_HEADER = "name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\n"


def write_workflow_config(workdir: Path, models: dict[str, Path], **overrides) -> Path:
    """A config for a run in `workdir` on local model directories (tiny models), with the
    repository's questionnaires and stimuli; returns the config file."""
    workdir.mkdir(parents=True, exist_ok=True)
    table = workdir / "models.tsv"
    rows = [f"{name}\t{path}\t\t{0.001 * (i + 1)}\tbase\ttiny\tfloat32\n" for i, (name, path) in enumerate(models.items())]
    table.write_text(MODEL_TABLE_HEADER + "".join(rows))
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["models"] = str(table)
    config["models_dir"] = str(workdir / "models")
    config["questionnaires"] = {k: str(ROOT / v) for k, v in config["questionnaires"].items()}
    config["stimuli"]["classes"] = {k: str(ROOT / v) for k, v in config["stimuli"]["classes"].items()}
    config.update({"limit_items": 2, "limit_stimuli": 2})
    config["engine"]["threads"] = 1
    config["analysis"]["bootstrap"] = 200
    config["report"] = False  # the report each run ends with: the shared run writes the one the tests open
    if "conditions" in overrides and "contrasts" not in overrides:
        config.pop("contrasts")  # the paper's contrasts that the conditions allow
    config.update(overrides)
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def workflow_env() -> dict[str, str]:
    """The environment of every local Snakemake run from the tests (and of the commands that start one): the tests'
    directory importable, so a config can name a probe kind written in the tests (tests/yesno_probe.py); and no SLURM
    configuration. Whenever Snakemake starts, its SLURM executor plugin runs `scontrol show config`, which waits 9 s
    for a controller where SLURM's client is installed and no controller runs (this machine once test_slurm's
    cluster is down: a dry run took 10.5 s, 9.0 s of it in scontrol); an empty configuration makes scontrol fail at
    once. The SLURM run of test_slurm keeps the machine's configuration."""
    path = os.pathsep.join(p for p in (str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "SLURM_CONF": os.devnull}


def run_snakemake(workdir: Path, config: Path, *args: str, timeout: int = 900, gpus: int = 1,
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the workflow in `workdir`; `args` (targets, flags) go before the options that take
    lists, so a target is never read as a resource or a config file. ``gpus``: the run's gpu resource, the scoring
    and fine-tuning jobs it runs at once (2, on these 2 cores, where each job runs on one thread and the test does
    not read the order of the jobs: a run of a dozen such jobs takes half the time). ``env``: variables that
    replace :func:`workflow_env`'s (a ``PYTHONPATH`` without the tests directory)."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), *args, "--directory", str(workdir),
           "--cores", "2", "--resources", f"gpu={gpus}", "--configfile", str(config), "--replace-workflow-config"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**workflow_env(), **(env or {})})


def spec_for(source: Path, **flags):
    """The parsed model-table row of a local model directory (name m1), with the given flags."""
    from qclm.models.table import parse_model_row

    row = {"name": "m1", "source": str(source), "revision": "", "params_b": "0.001", "type": "base",
           "family": "tiny", "dtype": "float32", **{k: str(v).lower() for k, v in flags.items()}}
    return parse_model_row(row, "models.tsv", 2)


def copy_model(src: Path, dst: Path, files=("config.json", "model.safetensors", "tokenizer.json",
                                             "tokenizer_config.json")) -> Path:
    dst.mkdir(parents=True)
    for name in files:
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def snakemake_cmd(workdir: Path, config: Path, *targets: str) -> list[str]:
    """Targets come first: --configfile and --resources take several values."""
    return [sys.executable, "-m", "snakemake", *targets, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
            "--configfile", str(config), "--cores", "2", "--resources", "gpu=1"]


#: the shared run: Likert questionnaires (the paper's two, and two of the library for the construct map), a probe
#: kind written in the tests, the CSI kind, a class unknown to the code and a composed condition
SHARED_QUESTIONNAIRES = ("stai_s", "stai_t", "gad7", "rses")
SHARED_CONDITIONS = ["vanilla", "stress", "neutral", "soothing", "stress+soothing"]
SHARED_CONTRASTS = [["vanilla", "stress"], ["vanilla", "neutral"], ["neutral", "stress"], ["stress", "stress+soothing"],
                    ["soothing", "stress"]]


@dataclass(frozen=True)
class SharedRun:
    workdir: Path
    config: Path
    models: dict[str, Path]
    stderr: str

    @property
    def results(self) -> Path:
        return self.workdir / "results"


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory, tiny_llama_dir, tiny_gemma_dir) -> SharedRun:
    """One real workflow run on two tiny models, shared by the wiring tests (tests/test_workflow.py and others that
    only read what a run leaves): every stage of every probe kind of the config, once per test session."""
    workdir = tmp_path_factory.mktemp("shared-run")
    data = yaml.safe_load((ROOT / "resources/stimuli/neutral.yaml").read_text())
    data["class"] = "soothing"
    for s in data["stimuli"]:
        s["id"] = s["id"].replace("neutral", "soothing")
    (workdir / "soothing.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    models = {"tiny-llama": tiny_llama_dir, "tiny-gemma3": tiny_gemma_dir}
    control = (ROOT / "resources/csi/valence_control.tsv").read_text().splitlines()
    header = next(i for i, line in enumerate(control) if line.startswith("word\t"))
    rows = control[header + 1:]
    positive = [r for r in rows if not r.split("\t")[3].startswith("-")][:6]
    negative = [r for r in rows if r.split("\t")[3].startswith("-")][:6]
    (workdir / "csi_control.tsv").write_text("\n".join(control[:header + 1] + positive + negative) + "\n")
    cfg = write_workflow_config(
        workdir, models,
        questionnaires={q: str(ROOT / "resources" / "questionnaires" / f"{q}.yaml") for q in SHARED_QUESTIONNAIRES},
        probes={"yesno": {"kind": "yesno_probe", "instrument": str(ROOT / "resources/questionnaires/stai_s.yaml")},
                "gad7_ent": {"kind": "entailment", "instrument": str(ROOT / "resources/entailment/gad7.yaml")},
                # the CSI kind (tests/test_csi.py), small: 12 words and 12 control words, 2 repetitions
                "csi": {"kind": "csi", "words": str(ROOT / "resources/csi/words.tsv"),
                        "control": str(workdir / "csi_control.tsv"), "limit_words": 12, "repetitions": 2,
                        "list_size": 6},
                # the behaviour kind, an installed package on the plug-in API (tests/test_behaviour.py): its
                # validity table beside the Likert questionnaires, RSES the unrelated one
                "behaviour": {"kind": "behaviour", "items": 2, "unrelated": ["rses"]}},
        conditions=SHARED_CONDITIONS, contrasts=SHARED_CONTRASTS, report=True)
    config = yaml.safe_load(cfg.read_text())
    config["stimuli"]["classes"]["soothing"] = str(workdir / "soothing.yaml")
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    run = run_snakemake(workdir, cfg, gpus=2)
    assert run.returncode == 0, run.stderr[-4000:]
    return SharedRun(workdir, cfg, models, run.stderr)


#: the models of the workstation run
FIRST_MODELS = ("tiny-llama", "tiny-gemma3")


@dataclass(frozen=True)
class WorkstationRun:
    workdir: Path
    config: Path
    log: str
    #: the score tables and raw log-probs as this run wrote them (tests/test_add_model.py later adds a model)
    first_results: Path


@pytest.fixture(scope="session")
def workstation_run(tmp_path_factory, tiny_llama_dir, tiny_gemma_dir) -> WorkstationRun:
    """The workflow on two tiny models as on a one-GPU workstation: --cores 2 --resources gpu=1 and no other option
    (the design card's command: the workstation profile is found by Snakemake itself). Shared by
    tests/test_add_model.py and tests/test_determinism.py, once per test session."""
    workdir = tmp_path_factory.mktemp("workstation")
    config = write_workflow_config(workdir, dict(zip(FIRST_MODELS, (tiny_llama_dir, tiny_gemma_dir))))
    run = run_snakemake(workdir, config, timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    first = tmp_path_factory.mktemp("workstation-first")
    for part in ("scores", "logprobs"):
        shutil.copytree(workdir / "results" / part, first / part)
    return WorkstationRun(workdir, config, run.stderr, first)


#: Debian's chromium and its driver (make browser installs them as root); selenium is pointed at both, so nothing
#: downloads a browser or a driver of its own
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="session")
def browser():
    """Open a local HTML file in headless chromium and return what a reader would meet: the page's text, its
    images with their loaded width (0: broken), its number of tables and the console's errors. ``wait_for``: a text
    the page renders with its scripts (Snakemake's report builds itself), waited for up to 30 s. Skips where the
    browser is not installed (not root: make browser could not install it)."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (make browser, as root)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--allow-file-access-from-files"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)

    def read(path: Path, wait_for: str | None = None) -> dict:
        driver.get_log("browser")  # what earlier pages logged
        driver.get(Path(path).resolve().as_uri())
        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
        if wait_for:
            WebDriverWait(driver, 30).until(lambda d: wait_for in d.find_element("tag name", "body").text)
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            "return Array.from(document.images).every(i => i.complete)"))
        return {"text": driver.find_element("tag name", "body").text,
                # what the page rendered, scrolled into view or not (``text`` is what is on the screen)
                "rendered": driver.execute_script("return document.body.innerText"),
                "images": driver.execute_script(
                    "return Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth])"),
                "tables": len(driver.find_elements("tag name", "table")),
                "errors": [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]}

    yield read
    driver.quit()


_modules = itertools.count()


@pytest.fixture
def kind_module(tmp_path, monkeypatch):
    """Write a Python module (a user's probe kind, or any module a registry reference names) under a fresh name on
    sys.path; its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"user_module_{next(_modules)}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / f"{name}.py").write_text(source)
        return name

    return write
