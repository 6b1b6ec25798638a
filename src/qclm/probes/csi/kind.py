"""The Core Sentiment Inventory probe kind (issue 18, docs/csi.md).

Per context of a condition (vanilla, or one stimulus), every list of every repetition of the word list (and of the
valence control list) is one chain of forced choices (``list`` mode; :mod:`.prompts`), all of the context's chains
in one backend call, so each list's prompt and its answers so far are a growing shared prefix; ``single`` mode asks
each word alone (a forced choice; a repetition differs from another by its label order and the instruction's
wording, :mod:`.prompts`, and each distinct prompt is scored once: a repetition that repeats an earlier prompt gets
a copy of its answer, with the same ``prompt_id``, and the analysis counts it once). At each word the choice is
between the two labels and the third option (``other``, named in the instruction unless ``name_other`` is false);
the chosen one is the argmax of the options' log-probabilities, so every answer parses. Under vanilla, for
instruct models, the story test (:mod:`.story`) follows.

The raw table (:mod:`qclm.probes.csi.columns`: ``ANSWER_COLUMNS`` and ``STORY_COLUMNS``, ``part`` telling which:
``words``, ``control``
or ``story``) becomes, across models and conditions (:meth:`CSIProbe.collect`), ``csi_answers.parquet`` (every
answer), ``csi_words.csv`` (per word), ``csi_items.parquet`` (the item-score shape: the per-model state-trait
decomposition applies) and ``csi_stories.csv``; the analysis (:mod:`.analysis`) writes ``csi_scores.csv`` and
the rest under analysis/.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from qclm.errors import Problem
from qclm.experiment import VANILLA
from qclm.inputs import SAME_TEXT, identity, line_problem, show, size, text_problem
from qclm.probes.base import FILE_SETTING, Answer, Asking, CollectInput, Labelled, ProbeKind, ScoringCell
from qclm.probes.csi import prompts as P
from qclm.probes.csi.columns import ANSWER_COLUMNS, CHOICES, COLUMNS
from qclm.probes.csi.outputs import OUTPUTS
from qclm.probes.csi.words import WordList, load_words, word_problems

if TYPE_CHECKING:
    import pandas as pd

    from qclm.contexts import Context

class CSIProbe(ProbeKind):
    name = "csi"
    needs = ("choose_chain", "choose", "generate")
    calibration = "qclm.probes.csi.calibration:units"
    materials = "qclm.probes.csi.calibration:MATERIALS"
    summary = ("Core Sentiment Inventory: word-by-word forced choices between two labels (comedy/tragedy) over "
               "shuffled lists; optimism, pessimism, consistency, reluctancy, with a valence control and a story test")
    schema = {
        "type": "object",
        "properties": {
            "words": {**FILE_SETTING, "default": "resources/csi/words.tsv",
                      "description": "the word list: one word per line, or a TSV with a word column (optional pos, "
                                     "freq_rank, valence)"},
            "limit_words": {"type": ["integer", "null"], "minimum": 1, "default": 1000,
                            "description": "the first N words of the list (null: all; 5000 is the paper's size)"},
            "control": {"type": ["string", "null"], "minLength": 1, "default": "resources/csi/valence_control.tsv",
                        "description": "the valence control list (a word list with a valence column), scored the "
                                       "same way in lists of its own; null: none"},
            "mode": {"enum": ["list", "single"], "default": "list",
                     "description": "list: n shuffled words per prompt, answered line by line (the paper's); "
                                    "single: one word per prompt"},
            "list_size": {"type": "integer", "minimum": 1, "maximum": 200, "default": 30,
                          "description": "words per list (at most 200: one prompt answers them line by line)"},
            "repetitions": size("repetitions", default=5,
                            description="shuffled repetitions of the whole list"),
            "labels": {"type": "array", "items": {"type": "string", "minLength": 1, "pattern": "^\\S+$"},
                       "minItems": 2, "maxItems": 2, "uniqueItems": True, "default": ["comedy", "tragedy"],
                       "description": "the two labels, optimism's first ([good, bad] is the paper's ablation)"},
            "other": {"type": "string", "minLength": 1, "pattern": "^\\S+$", "default": "neither",
                      "description": "the third option at each position, named in the instruction (reluctancy: "
                                     "answers that are neither label)"},
            "name_other": {"type": "boolean", "default": True,
                           "description": "the instruction names the third option (\"If a word makes you think of "
                                          "neither, answer neither.\"); false: the control, an instruction that "
                                          "names the two labels only (the third option is still scored)"},
            "wordings": {"type": ["integer", "null"], "minimum": 1, "maximum": len(P.INSTRUCTIONS), "default": None,
                         "description": "how many of the instruction's wordings the repetitions go through in turn "
                                        "(each for both label orders when they alternate); null: all in single "
                                        "mode (a word's repetitions then differ in wording as well as label "
                                        "order), the first alone in list mode (the paper's one instruction)"},
            "swap_labels": {"enum": list(P.SWAP_MODES), "default": "alternate",
                            "description": "alternate: even repetitions name the labels in swapped order (the "
                                           "control for first-label bias); none: always the configured order"},
            "story_test": {"type": "boolean", "default": True,
                           "description": "instruct models, under vanilla: stories from k of 5 words of the model's "
                                          "own tragedy list (k = 0..5), rated 1-10 by the model"},
            "story_samples": size("repetitions", default=4,
                              description="stories per k (6 values of k)"),
            "story_tokens": size("new_tokens", minimum=8, default=96,
                             description="the most tokens a story may have"),
        },
        "additionalProperties": False,
    }
    scoring_keys = ("words", "limit_words", "control", "mode", "list_size", "repetitions", "labels", "other",
                    "name_other", "wordings", "swap_labels", "story_test", "story_samples", "story_tokens")
    file_keys = ("words", "control")
    shipped = {"words": "csi", "control": "csi"}
    config_sections = ()
    outputs = OUTPUTS
    score_tables = {"answers": "csi_answers.parquet", "words": "csi_words.csv", "items": "csi_items.parquet",
                    "stories": "csi_stories.csv"}
    item_table = "items"
    commands = {"words": "qclm.probes.csi.command"}
    #: 2: the instruction names the third option; wordings; the raw table's wording and prompt_id columns
    version = 2

    def __init__(self, instance):
        super().__init__(instance)
        self._lists: dict[str, WordList] = {}

    # -- material ---------------------------------------------------------------------------------------------
    def word_list(self, key: str) -> WordList:
        if key not in self._lists:
            self._lists[key] = load_words(self.settings[key])
        return self._lists[key]

    def problems(self) -> list[Problem]:
        out = []
        for key in self.file_keys:
            if self.settings.get(key):
                out.extend(word_problems(self.settings[key]))
        out.extend(self.option_problems())
        if not out and self.settings.get("control"):
            rated = [w.valence for w in self.word_list("control").words if w.valence]
            if len({valence > 0 for valence in rated}) < 2:
                out.append((self.settings["control"], "column valence",
                            "the valence control needs words of both signs in its valence column"))
        return out

    def option_problems(self) -> list[Problem]:
        """The three options of every forced choice (the two labels and the third option) are texts a user gives:
        the text checks of every user text and one line each (:func:`qclm.inputs.text_problem`,
        :func:`qclm.inputs.line_problem`), and three options a reader can tell apart (:func:`qclm.inputs.identity`,
        case aside: "Comedy" and "comedy", or "neither" with a zero-width space, would make a choice between two
        identical options)."""
        src, base = self.instance.source, self.instance.where or "probe"
        s = self.settings
        named = [(f"{base}.labels, entry {n + 1}", label) for n, label in enumerate(s["labels"])]
        named.append((f"{base}.other", s["other"]))
        out: list[Problem] = []
        seen: dict[str, tuple[str, str]] = {}
        for where, text in named:
            if not isinstance(text, str):
                continue  # the schema reports it
            problem = text_problem(text) or line_problem(text)  # (not a document: no text rule ran on it)
            if problem:
                out.append((src, where, f"{show(text)} {problem}"))
            key = identity(text, case=False)
            if key in seen:
                first_where, first = seen[key]
                what = "the third option" if where.endswith(".other") else "the label"
                same = "" if first == text else f" ({show(text)} and {show(first)} {SAME_TEXT}, case aside)"
                out.append((src, where, f"{what} {show(text)} is the same as {first_where.removeprefix(base + '.')}"
                            f"{same}: every choice would be between two identical options; the two labels and "
                            "the third option must differ"))
            else:
                seen[key] = (where, text)
        return out

    def parts(self) -> list[tuple[str, tuple]]:
        """(part, words) of what is scored: the word list's first ``limit_words`` and the control list."""
        out = [("words", self.word_list("words").head(self.settings["limit_words"]))]
        if self.settings.get("control"):
            out.append(("control", self.word_list("control").words))
        return out

    def n_wordings(self) -> int:
        return P.wording_count(self.settings["mode"], self.settings.get("wordings"))

    def lists(self, seed: int) -> list[P.WordList]:
        s = self.settings
        size = s["list_size"] if s["mode"] == "list" else 1
        return [wl for part, words in self.parts()
                for wl in P.shuffled_lists([w.word for w in words], part, s["repetitions"], size, seed,
                                           self.instance.id, s["swap_labels"], self.n_wordings())]

    # -- scoring ----------------------------------------------------------------------------------------------
    @classmethod
    def request_kinds(cls, settings: dict[str, Any]) -> tuple[str, ...]:
        """``list`` mode chains its forced choices, ``single`` asks them alone; the story test generates."""
        return (("choose_chain",) if settings["mode"] == "list" else ("choose",)) + (
            ("generate", "choose") if settings["story_test"] else ())

    def requests(self, context: Context, prompts, asking: Asking) -> list[Labelled]:
        """The word lists of the run seed (``asking.seed``), shuffled as :meth:`lists` says."""
        s = self.settings
        seed = asking.seed
        labels, other, named = s["labels"], s["other"], s["name_other"]
        out = []
        if s["mode"] == "list":
            for wl in self.lists(seed):
                out.append(Labelled({"list": wl}, P.chain(prompts, context.lead, wl, labels, other, named),
                                    f"{self._file(wl.part)}: {wl.part} list {wl.index} of repetition {wl.repetition}",
                                    f"{wl.part} list {wl.index}, repetition {wl.repetition} ({wl.order}, wording "
                                    f"{wl.wording}), {len(wl.words)} words"))
            return out
        seen = set()
        for wl in self.lists(seed):
            if wl.prompt_id in seen:  # a repetition that repeats an earlier prompt: scored once
                continue
            seen.add(wl.prompt_id)
            word = wl.words[0]
            out.append(Labelled({"prompt_id": wl.prompt_id},
                                P.single(prompts, context.lead, word, labels, other, wl.order, wl.wording, named),
                                f"{self._file(wl.part)}: word {word!r}",
                                f"{wl.part} word {word!r} ({wl.order}, wording {wl.wording})"))
        return out

    def _file(self, part: str) -> str:
        return self.settings["words" if part == "words" else "control"]

    def rows(self, cell: ScoringCell, answers: list[Answer]) -> tuple[pd.DataFrame, dict]:
        """Per context, a row per word of each list (``list`` mode: each step of its chain; ``single``: each list's
        one word, a repeated prompt's answer read once for each list that repeats it), then for instruct models
        under vanilla the story test's rows (:mod:`qclm.probes.csi.story`, which asks the model again)."""
        import pandas as pd

        s = self.settings
        info = {part: {w.word: w for w in words} for part, words in self.parts()}
        frames, stories = [], []
        for ctx, mine in cell.by_context(answers):
            rows = []
            if s["mode"] == "list":
                for a in mine:
                    wl = a.key["list"]
                    for position, (word, choice) in enumerate(zip(wl.words, a.result.steps), start=1):
                        rows.append(self._row(cell, ctx, wl, position, word, choice, info))
            else:
                by_prompt = {a.key["prompt_id"]: a.result for a in mine}
                for wl in self.lists(cell.asking.seed):
                    rows.append(self._row(cell, ctx, wl, 1, wl.words[0], by_prompt[wl.prompt_id], info))
            answered = pd.DataFrame(rows, columns=ANSWER_COLUMNS)
            frames.append(answered)
            if s["story_test"] and cell.condition == VANILLA and _instruct(cell):
                from qclm.probes.csi.story import story_test

                stories.append(story_test(self, cell, ctx, answered))
        df = pd.concat(frames + stories, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
        df = df.reindex(columns=COLUMNS)
        own = {"csi_words_sha256": self.word_list("words").sha256,
               "csi_control_sha256": self.word_list("control").sha256 if s.get("control") else None,
               "csi_n_words": len(info["words"]), "csi_n_control": len(info.get("control", {})),
               "csi_labels": list(s["labels"]), "csi_other": s["other"], "csi_name_other": s["name_other"],
               "csi_mode": s["mode"], "csi_repetitions": s["repetitions"], "csi_list_size": s["list_size"],
               "csi_swap_labels": s["swap_labels"], "csi_wordings": self.n_wordings(),
               "csi_story_test": bool(stories), "csi_instruction": self.instructions(),
               "csi_instruction_sha256": instruction_sha256(self.instructions())}
        return _typed(df), own

    def instructions(self) -> list[str]:
        """The instructions this instance asks with (placeholders for the labels and the third option)."""
        return P.instruction_templates(self.n_wordings(), self.settings["name_other"])

    def _row(self, cell: ScoringCell, ctx, wl: P.WordList, position: int, word: str, choice, info) -> dict:
        w = info[wl.part][word]
        s = self.settings
        k = choice.argmax
        return {"model": cell.model, "probe": self.instance.id, "condition": cell.condition,
                "stimulus_id": ctx.stimulus_id, "part": wl.part, "repetition": wl.repetition,
                "label_order": wl.order, "wording": wl.wording, "prompt_id": wl.prompt_id, "list_index": wl.index,
                "position": position, "list_size": len(wl.words),
                "word": word, "pos": w.pos, "freq_rank": w.freq_rank, "valence": w.valence,
                "label_a": s["labels"][0], "label_b": s["labels"][1], "label_other": s["other"],
                "logp_a": choice.option_logprobs[0], "logp_b": choice.option_logprobs[1],
                "logp_other": choice.option_logprobs[2], "p_a": choice.probs[0], "p_b": choice.probs[1],
                "p_other": choice.probs[2], "choice": CHOICES[k], "chosen": (*s["labels"], s["other"])[k]}

    # -- CPU stages -------------------------------------------------------------------------------------------
    @classmethod
    def collect(cls, data: CollectInput) -> dict[str, pd.DataFrame]:
        from qclm.probes.csi.scores import collect_tables

        return collect_tables([t["raw"] for _, t in sorted(data.cells.items())])

    @classmethod
    def overview(cls, context, results) -> str:
        from qclm.probes.csi.analysis import overview

        return overview(results["csi_scores"], results["csi_validity"], results["csi_contrasts"],
                        results["csi_story"], results["csi_state_trait"])

    # -- the command line -------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--words", help="word list: a text file (one word per line) or a TSV with a word column")
        parser.add_argument("--limit-words", type=int, help="the first N words (default 1000)")
        parser.add_argument("--control", help="valence control list ('none': no control)")
        parser.add_argument("--mode", choices=["list", "single"], help="list (default) or single")
        parser.add_argument("--list-size", type=int, help="words per list (default 30)")
        parser.add_argument("--repetitions", type=int, help="shuffled repetitions (default 5)")
        parser.add_argument("--labels", help="the two labels, comma-separated (default comedy,tragedy)")
        parser.add_argument("--other", help="the third option (default neither)")
        parser.add_argument("--no-name-other", action="store_true",
                            help="the control: an instruction that does not name the third option")
        parser.add_argument("--wordings", type=int,
                            help=f"instruction wordings the repetitions go through (1-{len(P.INSTRUCTIONS)}; default: "
                                 "all in single mode, 1 in list mode)")
        parser.add_argument("--swap-labels", choices=list(P.SWAP_MODES),
                            help="alternate (default): even repetitions name the labels swapped; none")
        parser.add_argument("--no-story-test", action="store_true", help="skip the story test")

    @classmethod
    def settings_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("words", "limit_words", "mode", "list_size", "repetitions", "other", "wordings", "swap_labels"):
            if getattr(args, key) is not None:
                out[key] = getattr(args, key)
        if args.control is not None:
            out["control"] = None if args.control.lower() == "none" else args.control
        if args.labels is not None:
            out["labels"] = [x.strip() for x in args.labels.split(",")]
        if args.no_story_test:
            out["story_test"] = False
        if args.no_name_other:
            out["name_other"] = False
        return out


def instruction_sha256(instructions: list[str]) -> str:
    """Hash of the instructions a run asks with (the provenance's ``csi_instruction_sha256``)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(instructions).encode("utf-8")).hexdigest()


def _instruct(cell: ScoringCell) -> bool:
    return cell.asking.model_type == "instruct"


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Stable dtypes for the mixed table (answers and stories; Parquet needs one type per column)."""
    ints = ["repetition", "wording", "list_index", "position", "list_size", "freq_rank", "story_k", "story_sample",
            "rating_argmax"]
    floats = ["valence", "logp_a", "logp_b", "logp_other", "p_a", "p_b", "p_other", "rating_expected"]
    strings = [c for c in COLUMNS if c not in ints + floats]
    return df.astype({**{c: "Int64" for c in ints}, **{c: "float64" for c in floats},
                      **{c: "string" for c in strings}})


KIND = CSIProbe
