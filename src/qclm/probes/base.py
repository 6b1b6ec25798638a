"""What a probe kind is (docs/probes.md): the contract every measurement of qclm implements.

A **probe kind** (a subclass of :class:`ProbeKind`) declares

- its **settings** (``schema``: a JSON Schema of the keys of its config entry, with defaults) and which of them
  change what the scoring job computes (``scoring_keys``; the others only change the CPU stages after it);
- the **material** it reads (``files``, checked by ``problems`` at DAG time as ``FILE: LOCATION: PROBLEM``);
- the **requests** it needs in one context, a condition x stimulus, asking one model under the run's seed and
  settings (``requests(context, prompts, asking)``, :class:`Asking`: log-likelihoods, forced choices, chains of
  forced choices, generations, classifications, all built through the prompt builder), and how the answers become
  its raw per-cell table (``rows``: ``qclm render`` shows what is scored). The scoring job asks: its request loop
  (:meth:`ScoringCell.ask`, qclm.engine.asking) sends every context's requests to the backend, batched by request
  kind, with the job's progress bar; a kind never calls the backend;
- the CPU stages after scoring: per-cell tables (``cell_scores``), the tables across models and conditions
  (``collect``), and its analysis (``analyze``).

A **probe instance** is one config entry (``probes: {ID: {kind: KIND, ...}}``; ``questionnaires: {ID: FILE}`` is
the Likert kind's shorthand). The conditions, stimuli, composed conditions, prompt formats, the per-model scoring
job (weights loaded once), its cell cache and the Parquet provenance are shared by every kind: a kind only says
what to ask in one context and what its answers mean. The workflow fans out model x instance x condition.

Nothing here imports torch: the workflow builds its DAG, and the CPU stages run, with these classes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from qclm.contexts import ContextSettings
from qclm.errors import Problem

if TYPE_CHECKING:
    import pandas as pd

    from qclm.contexts import Context
    from qclm.engine.backend import Backend
    from qclm.prompts import PromptBuilder


#: the JSON Schema of a setting that names a material file (a kind's instrument, word list, a plant's corpus): a
#: non-empty path, or a shipped file's name where the kind's ``shipped`` says so; add its ``description``
FILE_SETTING: dict[str, Any] = {"type": "string", "minLength": 1}


@dataclass(frozen=True)
class Instance:
    """One probe instance: its id (used in file names and tables), its kind, its settings (the kind's schema's
    defaults filled in), the conditions it runs under (None: all of the experiment's), where it was declared (for
    messages) and the models it scores (None: all)."""

    id: str
    kind: str
    settings: dict[str, Any]
    conditions: tuple[str, ...] | None = None
    # where it was declared: for messages only, not part of what a rule's params compare
    source: str = field(default="", compare=False, repr=False)
    where: str = field(default="", compare=False, repr=False)
    #: the models it scores: shell-style patterns of the model table's names (None: every model; a checkpoint
    #: goes with its base model), :func:`qclm.probes.runs_on`
    models: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Asking:
    """Whom a kind's requests ask and under what: the model (its name in the model table; ``model_type``: its type,
    ``base`` or ``instruct``, for requests that only make sense for one type), the run seed (``engine.seed``: the
    seeds of shuffles and generations derive from it), the run's context settings (``limit_items`` ...), the
    config sections the kind's scoring reads (:attr:`ProbeKind.scoring_sections`, :meth:`ProbeKind.scoring_config`)
    and the model's head (the model table's ``head``: ``nli`` for a sequence classifier, which answers classify
    requests only). The scoring job and ``qclm render`` build it the same way, so render shows what is scored."""

    model: str = ""
    model_type: str = ""
    seed: int = 0
    run: ContextSettings = ContextSettings()
    config: dict[str, Any] = field(default_factory=dict, hash=False)
    head: str = ""

    @classmethod
    def from_config(cls, config: dict, model: str = "", model_type: str = "",
                    kind: type[ProbeKind] | None = None, head: str = "") -> Asking:
        """How the scoring job asks ``model`` (its name and type) under a config: its run seed (``engine.seed``),
        its context settings and the sections ``kind``'s scoring reads (``qclm render`` builds it here; the scoring
        job, in the workflow and under ``qclm probe``, from the same values: the engine seed, ContextSettings and
        the cell's ``config``, qclm.jobs.score_model.score_cell)."""
        from qclm import settings

        return cls(model, model_type, settings.section(config, settings.ENGINE)["seed"],
                   ContextSettings.from_config(config), kind.scoring_config(config) if kind else {}, head)


@dataclass(frozen=True)
class Answer:
    """One request of a cell with its context and the backend's result (:meth:`ScoringCell.ask`)."""

    context: Context
    labelled: Labelled
    result: Any

    @property
    def key(self) -> dict[str, Any]:
        return self.labelled.key


@dataclass
class ScoringCell:
    """What a kind's :meth:`ProbeKind.score` works with: one condition and its contexts, asked of one model
    (``asking``) through the scoring job's request loop (:meth:`ask`: the backend, the job's progress bar) and the
    prompt builder of the model's prompt format."""

    condition: str
    contexts: list[Context]
    backend: Backend
    prompts: PromptBuilder
    asking: Asking
    progress: Callable[[int], None] | None = None

    @property
    def model(self) -> str:
        return self.asking.model

    def ask(self, asked: list[tuple[Context, Labelled]]) -> list[Answer]:
        """The answers of labelled requests, each of one of the cell's contexts, in their order: the job's request
        loop (qclm.engine.asking) sends them to the backend, each request kind of the cell at once (one context at
        a time for a model in this process), errors naming a request by its ``describe``."""
        from qclm.engine.asking import ask

        results = ask(self.backend, [r.request for _, r in asked], [id(c) for c, _ in asked],
                      lambda i: asked[i][1].describe, self.progress)
        return [Answer(c, r, result) for (c, r), result in zip(asked, results, strict=True)]

    def answers(self, probe: ProbeKind) -> list[Answer]:
        """The answers of every request ``probe`` asks in the cell's contexts (:meth:`ProbeKind.requests`)."""
        return self.ask([(c, r) for c in self.contexts for r in probe.requests(c, self.prompts, self.asking)])

    def by_context(self, answers: list[Answer]) -> list[tuple[Context, list[Answer]]]:
        """Each of the cell's contexts, in order, with its answers (in the order asked)."""
        mine: dict[int, list[Answer]] = {id(c): [] for c in self.contexts}
        for a in answers:
            mine[id(a.context)].append(a)
        return [(c, mine[id(c)]) for c in self.contexts]


@dataclass(frozen=True)
class Labelled:
    """A request with what identifies it (``key``: the values its rows carry; ``item_id`` where it has an item),
    how an error names it (``describe``: file, item, field) and a one-line label (``qclm render``)."""

    key: dict[str, Any]
    request: Any
    describe: str = ""
    label: str = ""


@dataclass
class ProbeAnalysis:
    """What a kind's analysis functions receive (the registry's ``context``): the kind's name, its score tables
    (name -> file, read once on first use) and the config (contrasts, the analysis settings, the sections the kind
    reads)."""

    kind: str
    files: dict[str, Path]
    config: dict
    item_table: str | None = None
    instances: list[Instance] = field(default_factory=list)
    _frames: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def settings(self) -> dict[str, Any]:
        """The config's analysis settings (bootstrap, seed, min_models, min_stimuli, ...), defaults filled in."""
        from qclm import settings

        return settings.section(self.config, settings.ANALYSIS)

    @property
    def contrasts(self) -> list[tuple[str, str]]:
        """The contrasts the config's analyses compare (:func:`qclm.experiment.config_contrasts`; none where the
        config declares no conditions)."""
        from qclm.experiment import config_contrasts

        return config_contrasts(self.config) or []

    def table(self, name: str):
        if name not in self._frames:
            import pandas as pd

            path = Path(self.files[name])
            self._frames[name] = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(
                path, keep_default_na=False, na_values=[""])
        return self._frames[name]


@dataclass
class CollectInput:
    """The per-cell tables of one kind's instances, across models and conditions, for :meth:`ProbeKind.collect`:
    ``cells[(model, instance, condition)][table name]`` (``raw`` is the scoring job's table) and each raw table's
    provenance, the model table's rows as a frame (model, params_b, model_type, family, dtype, prompt_format) and
    the instances."""

    cells: dict[tuple[str, str, str], dict[str, Any]]
    models: Any
    instances: list[Instance]
    config: dict = field(default_factory=dict)
    #: each cell's raw-table provenance (the Parquet metadata the scoring job wrote)
    metadata: dict[tuple[str, str, str], dict] = field(default_factory=dict)


class ProbeKind:
    """Base class of every probe kind; see the module docstring. Subclasses set the class attributes and implement
    ``requests`` and ``rows`` (``files`` where their material is not named by ``file_keys``); the CPU stages have
    defaults (no per-cell tables; collect concatenates the raw tables)."""

    #: the kind's name in configs (``kind: NAME``) and on the command line (``qclm probe NAME``)
    name: ClassVar[str] = ""
    #: one line for ``qclm probe --help`` and the docs
    summary: ClassVar[str] = ""
    #: the version of what the kind's scoring computes: raise it when the requests or the raw table change, so that
    #: the scoring jobs' params and cell-cache keys change and finished cells are scored again
    version: ClassVar[int] = 1
    #: JSON Schema (draft 2020-12) of the instance's own keys (``kind`` and ``conditions`` are common), defaults
    #: included; ``additionalProperties: false`` so a misspelt key is reported
    schema: ClassVar[dict] = {"type": "object", "properties": {}, "additionalProperties": False}
    #: the settings that change the scoring job's numbers (its params and cell-cache key); the rest are CPU-stage
    #: settings, and changing them reruns no scoring job
    scoring_keys: ClassVar[tuple[str, ...]] = ()
    #: the config sections (name -> keys) the kind's scoring reads beyond its instance's settings (the Likert kind:
    #: ``templates.score``): they reach ``requests`` as :attr:`Asking.config` and are in the kind's cells' keys and
    #: its scoring jobs' params only, so changing one rescores this kind's cells and no other kind's
    scoring_sections: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: the settings that name material files (checked to exist, hashed into the cell-cache key, inputs of the job)
    file_keys: ClassVar[tuple[str, ...]] = ()
    #: file setting -> the folder of the files shipped with qclm (qclm.shipped) that a name given for it reads
    #: (``questionnaire: gad7`` for resources/questionnaires/gad7.yaml); a setting not listed takes paths only
    shipped: ClassVar[dict[str, str]] = {}
    #: the per-cell tables ``cell_scores`` derives from the raw table (file suffixes under scores/MODEL/ID/)
    cell_tables: ClassVar[tuple[str, ...]] = ()
    #: the config sections the CPU stages read (``equations``, ``templates``, ...): the params of those stages, so a
    #: change reruns them, and only for the kinds that read it
    config_sections: ClassVar[tuple[str, ...]] = ()
    #: the top-level config sections the kind brings, name -> JSON Schema (the Likert kind's ``templates``): merged
    #: into the config schema (:func:`qclm.probes.full_config_schema`), so they are validated and documented as the
    #: shared sections are, and read with their defaults by :meth:`section`; a name a shared section has is refused
    #: (:func:`qclm.probes.registry.kind_problem`)
    config_schema: ClassVar[dict[str, dict]] = {}
    #: the tables ``collect`` writes, name -> file under the results' scores/ directory (a kind's files start with
    #: its name, so two kinds never write the same file)
    score_tables: ClassVar[dict[str, str]] = {}
    #: the score table, if any, that holds per-item numbers in the item-score shape (model, instrument, item_id,
    #: condition, stimulus_id, score): the per-model state-trait decomposition (items as subjects, stimuli as
    #: replications, method.md section 6b) applies to it, as to Likert questionnaires
    item_table: ClassVar[str | None] = None
    #: the score table the intervention analysis reads as the kind's per-item scores (the weights axis of the
    #: state-trait map, qclm.interventions.analysis); default the :attr:`item_table` (:meth:`intervention_items`)
    intervention_table: ClassVar[str | None] = None
    #: the kind's place in the report (its categories and its section of the first page): lower first, then by the
    #: order the config names the kinds (the Likert kind, the paper's measure, is 0)
    report_rank: ClassVar[int] = 100
    #: a top-level config key declaring the kind's instances as ``{ID: FILE}`` (the file its first file key reads;
    #: ``questionnaires`` for the Likert kind): a shorthand for ``probes: {ID: {kind: NAME, KEY: FILE}}``
    shorthand: ClassVar[str | None] = None
    #: the kind's own commands of the ``qclm`` command line, name -> module defining ``add_parser(sub)`` (which sets
    #: ``func``): ``qclm analyze`` is the Likert kind's, ``qclm words`` the CSI kind's (qclm.commands)
    commands: ClassVar[dict[str, str]] = {}
    #: tables of other kinds the analysis reads where the run has those kinds, name -> (kind, table): a score table's
    #: name, or ``analysis:NAME`` for one of that kind's analysis tables (:meth:`table_path`); the workflow passes
    #: them as ``context.files[name]`` only then (the survey reads the Likert item scores, the Likert kind the
    #: memorization table)
    optional_tables: ClassVar[dict[str, tuple[str, str]]] = {}
    #: the kind asks chat-format models only (``qclm validate`` and ``qclm probe`` name a raw row of the model table)
    chat_only: ClassVar[bool] = False
    #: the kind scores only the first ``limit_items`` items of each instrument where the run says so (the config's
    #: key, ``qclm probe --limit``; its requests read ``asking.run.limit_items``); ``qclm probe --limit`` refuses a
    #: kind that does not, rather than run it whole under a limit it ignores
    honours_limit_items: ClassVar[bool] = False
    #: the model heads (the model table's ``head`` column, qclm.models.table.HEADS) whose models the kind can ask:
    #: ``""`` a causal LM, ``nli`` a sequence classifier; ``qclm validate`` and ``qclm probe`` refuse an instance on
    #: a row whose head it cannot ask (the scoring job would fail on it)
    heads: ClassVar[tuple[str, ...]] = ("",)
    #: "module:function" that reads the kind's score tables as a plant's calibration units (docs/calibration.md,
    #: :mod:`qclm.calibration.analysis`); None: the kind cannot be calibrated yet
    calibration: ClassVar[str | None] = None
    #: "module:NAME" of the calibration materials the kind's probes read (a tuple of
    #: :class:`qclm.probes.calibration_material.Material`: how a plant's texts are built, its tier, keys and
    #: checks); None: no plant plants for the kind's probes
    materials: ClassVar[str | None] = None
    #: the kind's analysis tables and figures in report order (qclm.analysis.registry.Output; the built-in kinds'
    #: are in their package's outputs.py), their captions in ``report/`` beside the module that defines the kind;
    #: :meth:`analysis_outputs` checks them, the default :meth:`analyze` runs them, the workflow files them in the
    #: report
    outputs: ClassVar[tuple] = ()
    #: :attr:`outputs` as :meth:`analysis_outputs` declared them, set on each class on first use (declared only)
    _declared_outputs: ClassVar[tuple]
    #: the backend request kinds the kind's scoring asks (qclm.engine.capabilities.REQUEST_KINDS); ``qclm validate``
    #: refuses an instance on a model-table row whose backend does not answer one of them (:meth:`request_kinds`
    #: narrows it by the instance's settings)
    needs: ClassVar[tuple[str, ...]] = ()
    #: model head (:attr:`heads`) -> the request kinds the kind asks a model with that head instead (the entailment
    #: kind asks a sequence classifier, ``nli``, to classify): :meth:`asks`
    head_needs: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(self, instance: Instance):
        self.instance = instance
        self.settings = instance.settings

    @classmethod
    def intervention_items(cls) -> str | None:
        """The score table of per-item scores the intervention analysis reads (:attr:`intervention_table`, else
        :attr:`item_table`); None: the kind has none."""
        return cls.intervention_table or cls.item_table

    @classmethod
    def request_kinds(cls, settings: dict[str, Any]) -> tuple[str, ...]:
        """The request kinds an instance with these settings (defaults filled in) asks; the kind's ``needs`` unless
        a setting narrows them."""
        return cls.needs

    @classmethod
    def asks(cls, settings: dict[str, Any], head: str = "") -> tuple[str, ...]:
        """The request kinds an instance with these settings asks a model with this head (the model table's
        ``head``): :attr:`head_needs`' where it names the head, else :meth:`request_kinds`. ``qclm validate`` and
        ``qclm probe`` check them against the row's backend (qclm.engine.capabilities)."""
        return cls.head_needs.get(head) or cls.request_kinds(settings)

    # -- declared material (DAG time; no torch) ----------------------------------------------------------------
    def files(self) -> list[str]:
        """The material files this instance reads (their contents are in the cell-cache key)."""
        out: list[str] = []
        for key in self.file_keys:
            value = self.settings.get(key)
            out.extend([value] if isinstance(value, str) else list(value or []))
        return out

    def problems(self) -> list[Problem]:
        """Every problem of this instance's material and settings beyond its schema (FILE: LOCATION: PROBLEM)."""
        return []

    def scored_terms(self) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        """The words whose probabilities the instance's scores read, per instrument as the kind's tables name it ->
        (S+ terms, S- terms) (the construct terms of Likert and entailment items; empty for kinds that score no
        construct
        terms). The intervention tables count them in each fine-tuning corpus (qclm.interventions.overlap)."""
        return {}

    # -- scoring (the per-model job; the backend holds the model) ----------------------------------------------
    def requests(self, context: Context, prompts: PromptBuilder, asking: Asking) -> list[Labelled]:
        """The requests of one context, as the model will see them (``qclm render`` prints them); ``asking``: the
        model asked, the run seed, the run's context settings (``limit_items``) and the config sections the kind's
        scoring reads. Everything that decides a request comes from here or the instance: :meth:`score` sends
        exactly these requests."""
        raise NotImplementedError

    def score(self, cell: ScoringCell) -> tuple[pd.DataFrame, dict]:
        """The raw table of one cell and the kind's own provenance: the answers of the requests of :meth:`requests`
        in every context of the condition, asked through the job's request loop, made :meth:`rows`. A kind whose
        later requests depend on earlier answers (CSI's story test) asks again with :meth:`ScoringCell.ask`."""
        return self.rows(cell, cell.answers(self))

    def rows(self, cell: ScoringCell, answers: list[Answer]) -> tuple[pd.DataFrame, dict]:
        """The raw table of one cell from its answers (in the order :meth:`requests` gave them, context by
        context) and the kind's own provenance."""
        raise NotImplementedError

    # -- CPU stages after scoring (no torch) -------------------------------------------------------------------
    def cell_scores(self, raw: pd.DataFrame, config: dict) -> dict[str, pd.DataFrame]:
        """Per-cell tables derived from the raw table (``config``: the sections :attr:`config_sections` names, with
        their defaults)."""
        return {}

    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        """The kind's tables across models and conditions (names of :attr:`score_tables`)."""
        import pandas as pd

        frames = [tables["raw"] for tables in data.cells.values()]
        return {name: pd.concat(frames, ignore_index=True) for name in cls.score_tables}

    @classmethod
    def table_path(cls, table: str) -> str:
        """Where a table of the kind is, relative to the results directory: a score table (``scores/FILE``), or
        with ``analysis:NAME`` one of its analysis tables (``analysis/NAME.csv``)."""
        if table.startswith("analysis:"):
            from qclm.analysis.registry import TABLE, get

            return f"analysis/{get(cls.analysis_outputs(), TABLE, table.removeprefix('analysis:')).files[0]}"
        return f"scores/{cls.score_tables[table]}"

    @classmethod
    def analysis_outputs(cls) -> tuple:
        """:attr:`outputs`, checked (:func:`qclm.analysis.registry.declare`), with the kind's name and each
        caption's absolute path (relative ones are in ``report/`` beside the module that defines the kind)."""
        if cls.__dict__.get("_declared_outputs") is None:
            import sys

            from qclm.analysis.registry import captions_beside, declare

            module_file = sys.modules[cls.__module__].__file__
            if module_file is None:
                raise TypeError(f"probe kind {cls.name}: its module {cls.__module__} has no file, beside which its "
                                "captions are")
            caption_dir = captions_beside(module_file)
            cls._declared_outputs = declare(cls.name, cls.outputs, caption_dir)
        return cls._declared_outputs

    @classmethod
    def analyze(cls, tables: dict[str, Path], out: Path, config: dict, instances=()) -> dict[str, Any]:
        """The kind's analysis: its tables and figures (:meth:`analysis_outputs`) computed from its score tables
        (``tables``: name -> file) by the analysis runner, and its section of the report's first page
        (``analysis/overview.NAME.md``, the :meth:`overview` hook); ``instances``: the run's instances of the kind
        (their settings); returns the tables."""
        from qclm.analysis.overview import write_fragment
        from qclm.analysis.runner import run_outputs

        context = ProbeAnalysis(cls.name, dict(tables), config, cls.item_table, list(instances))
        results = run_outputs(cls.analysis_outputs(), context, out)
        write_fragment(out, cls.name, cls.overview(context, results))
        return results

    @classmethod
    def overview(cls, context: ProbeAnalysis, results: dict[str, Any]) -> str:
        """The kind's section of the report's first page (Markdown opening with a ``##`` heading)."""
        lines = [f"## {cls.name}: {cls.summary}", ""]
        lines += [f"- `{name}.csv`: {len(table)} rows" for name, table in results.items()]
        return "\n".join(lines) + "\n"

    # -- the command line (qclm probe KIND) --------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The kind's own options of ``qclm probe KIND``."""

    @classmethod
    def settings_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        """The instance settings the kind's options give (validated against :attr:`schema` afterwards)."""
        return {}

    @classmethod
    def instances_from_args(cls, args: argparse.Namespace) -> list[dict[str, Any]]:
        """The settings of each instance the options give: one (:meth:`settings_from_args`), unless the kind takes
        several files in one run (each then its own instance, named by its file)."""
        return [cls.settings_from_args(args)]

    # -- helpers ----------------------------------------------------------------------------------------------
    @classmethod
    def scoring_settings(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings that change the scoring job's numbers."""
        return {k: settings[k] for k in sorted(cls.scoring_keys) if k in settings}

    @classmethod
    def section(cls, config: dict, name: str) -> dict[str, Any]:
        """A config section the kind reads, with its defaults filled in: from the kind's own schema where the kind
        brings the section (:attr:`config_schema`: so a kind named by module path, which the registry does not
        merge, has them too), else from the config schema's."""
        from qclm import settings

        return settings.section(config, name, cls.config_schema.get(name))

    @classmethod
    def scoring_config(cls, config: dict) -> dict[str, Any]:
        """The config sections the kind's scoring reads (:attr:`scoring_sections`), only the keys it reads, defaults
        filled in."""
        return {name: {k: cls.section(config, name)[k] for k in keys}
                for name, keys in sorted(cls.scoring_sections.items())}

    @classmethod
    def stage_config(cls, config: dict) -> dict[str, Any]:
        """The config sections the CPU stages of this kind read, defaults filled in."""
        return {name: cls.section(config, name) for name in cls.config_sections}

    @classmethod
    def check_config(cls, config: dict, config_file: str, instances: list[tuple[str, Any, str]],
                     found: list[Problem]) -> list[Problem]:
        """Problems of the run's config that concern this kind across its instances (its own config sections,
        beyond each instance's :meth:`problems`): :func:`qclm.validation.validate_config` calls it once per kind the
        run has. ``instances``: (id, config entry, location) of each; ``found``: the instances' problems so far."""
        return []

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        from qclm import settings

        return settings.defaults_of(cls.schema)


def construct_terms(items) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(S+ terms, S- terms) of items with ``plus`` and ``minus`` construct terms, each term once, in order."""
    return (tuple(dict.fromkeys(t for i in items for t in i.plus)),
            tuple(dict.fromkeys(t for i in items for t in i.minus)))
