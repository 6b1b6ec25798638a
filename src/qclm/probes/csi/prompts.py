"""The CSI prompts and the shuffled lists (no torch).

The instructions are written for this project (the same task as the paper's, not its sentences). In ``list`` mode
the model sees the instruction and the n words of a list, then answers line by line, ``word: label``: each answer is
a forced choice at that position between the two labels and the third option (``other``), and the chosen answer
is appended before the next word (a :class:`~qclm.engine.requests.ChainRequest`), so the answers so far are part of
every later choice, as in the paper. ``single`` mode is the same prompt for a list of one word (a
:class:`~qclm.engine.requests.ChoiceRequest`).

The third option (``other``, by default "neither") is named in the instruction (:data:`NEUTRAL`: "If a word makes
you think of neither, answer neither."), so that answering neither label is something the model was offered: the
reluctancy rate (the paper's "frequency of neutral or non-committal responses") can then move. ``name_other:
false`` is the control: the instruction names the two labels only (the first wording is then exactly the
instruction of earlier versions), and the third option is still scored at every word.

Wordings: :data:`INSTRUCTIONS` holds three wordings of the instruction; a run uses the first ``n`` of them
(:func:`wording_count`: by default all three in single mode, the first alone in list mode). Repetition r names the
labels in the order :func:`label_order` gives and uses wording :func:`wording` (the wordings in turn, each for
both label orders when they alternate), so in single mode, where one word is asked alone and shuffling cannot
change the prompt, a word's repetitions differ in wording and label order: with swapped labels and three wordings,
up to six distinct prompts per word; beyond that a repetition repeats an earlier prompt, and the analysis counts
the distinct prompts actually asked (:func:`prompt_id`), not the repetitions.

How the answer follows the prompt depends on the model's prompt format (:mod:`qclm.prompts`): after raw text the
prompt ends with an ``Answers:`` cue and each answer line starts with a newline; in a chat format the answer is
the assistant's turn and its first line starts bare. Each label is scored with its leading space (it follows
``word:``).

Shuffles: a repetition's order of the words is the order of a hash of (run seed, instance id, part, repetition,
word) (:func:`qclm.engine.requests.derive_seed`), cut into lists of ``list_size`` (sizes differing by at most one).
So every model and every condition sees the same lists (paired comparisons over words, with each word at the same
position), adding a repetition changes no other repetition, and adding a word moves the others only by the
positions its insertion shifts (their order relative to each other is unchanged). Label order: with
``swap_labels: alternate`` the instruction names the labels in the configured order in odd repetitions (1, 3, ...)
and swapped in even ones; the first-label bias is the difference between the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: the wordings of the instruction (written for this project): the labels in the order a repetition names them
#: (``{first}``, ``{second}``), and ``{neutral}`` where the sentence naming the third option goes (:data:`NEUTRAL`,
#: or nothing with ``name_other: false``). The first without that sentence is the instruction of earlier versions.
INSTRUCTIONS = (
    "For each word in the list below, decide whether it makes you think of {first} or of {second}.{neutral} Go "
    "through the words in the order given and answer one word per line: the word, a colon and your choice.",
    "Below is a list of words. For each one, say which of the two it brings to mind more: {first} or "
    "{second}.{neutral} Answer the words in the order they are listed, one per line, as the word followed by a "
    "colon and your answer.",
    "Read each word below and note your first association with it: {first} or {second}.{neutral} Keep to the "
    "order of the list and write one line per word: the word, a colon, then your choice.",
)
#: the sentence that names the third option (``{other}``), after the question of every wording
NEUTRAL = " If a word makes you think of neither, answer {other}."
WORDS_CUE = "Words:"
#: the cue that opens the answer after raw text (a chat format's answer is the assistant's turn)
ANSWER_CUE = "Answers:"

STORY_INSTRUCTION = "Write a short story of three or four sentences that uses these five words: {words}."
STORY_CUE = "Story:"
RATING_INSTRUCTION = ("Here is a short story.\n\n{story}\n\nOn a scale from 1 (not tragic at all) to 10 (deeply "
                      "tragic), how tragic is this story?")
RATING_CUE = "Rating:"
#: the rating options: "k/10", so no option is a prefix of another (" 1" would be a prefix of " 10")
RATING_VALUES = tuple(range(1, 11))
RATING_OPTIONS = tuple(f"{k}/10" for k in RATING_VALUES)

#: ``swap_labels`` modes
SWAP_MODES = ("alternate", "none")


@dataclass(frozen=True)
class WordList:
    """One shuffled list of one repetition: its part (``words`` or ``control``), repetition (1-based), label
    order (``AB``: the configured order; ``BA``: swapped), index among the repetition's lists (1-based), words and
    wording (1-based index into :data:`INSTRUCTIONS`)."""

    part: str
    repetition: int
    order: str
    index: int
    words: tuple[str, ...]
    wording: int = 1

    @property
    def prompt_id(self) -> str:
        return prompt_id(self.part, self.wording, self.order, self.words)


def label_order(repetition: int, swap: str) -> str:
    """``AB`` or ``BA`` for a repetition (1-based)."""
    return "BA" if swap == "alternate" and repetition % 2 == 0 else "AB"


def wording_count(mode: str, wordings: int | None) -> int:
    """How many of :data:`INSTRUCTIONS` a run cycles through: ``wordings``, or by default all of them in single mode
    (a word alone: the wording and the label order are all a repetition can change) and the first alone in list
    mode (the paper's one instruction; the lists are reshuffled)."""
    if wordings is not None:
        return wordings
    return len(INSTRUCTIONS) if mode == "single" else 1


def wording(repetition: int, n_wordings: int, swap: str) -> int:
    """The wording (1-based) of a repetition (1-based): the wordings in turn, each for both label orders when they
    alternate (AB, BA with the first wording, then AB, BA with the second, ...)."""
    per = 2 if swap == "alternate" else 1
    return (repetition - 1) // per % n_wordings + 1


def prompt_id(part: str, wording: int, order: str, words: Sequence[str]) -> str:
    """What identifies the question one answer of a list answers, whatever the model's prompt format: the wording,
    the label order and the list's words in order (a short hash). Two answers of a word with the same id answered
    the same prompt (a copy, not an independent answer)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps([part, wording, order, list(words)]).encode("utf-8")).hexdigest()[:16]


def shuffled_lists(words: Sequence[str], part: str, repetitions: int, list_size: int, seed: int, probe: str,
                   swap: str = "alternate", n_wordings: int = 1) -> list[WordList]:
    """Every list of every repetition (module docstring)."""
    from qclm.engine.requests import derive_seed

    if not words:
        return []
    n_lists = -(-len(words) // list_size)
    base, extra = divmod(len(words), n_lists)
    out = []
    for r in range(1, repetitions + 1):
        order = sorted(words, key=lambda w: (derive_seed(seed, probe, part, r, w), w))
        at = 0
        for i in range(n_lists):
            size = base + (1 if i < extra else 0)
            out.append(WordList(part, r, label_order(r, swap), i + 1, tuple(order[at:at + size]),
                                wording(r, n_wordings, swap)))
            at += size
    return out


def instruction(labels: Sequence[str], order: str, wording: int = 1, other: str | None = None) -> str:
    """The instruction of one wording (1-based), the labels in ``order``; ``other``: the third option it names
    (None: the control, only the two labels named)."""
    first, second = (labels[0], labels[1]) if order == "AB" else (labels[1], labels[0])
    neutral = NEUTRAL.format(other=other) if other is not None else ""
    return INSTRUCTIONS[wording - 1].format(first=first, second=second, neutral=neutral)


def instruction_templates(n_wordings: int, name_other: bool) -> list[str]:
    """The instructions a run uses, with their placeholders (``{first}``, ``{second}``, ``{other}``): what the
    provenance records and hashes."""
    return [INSTRUCTIONS[i].replace("{neutral}", NEUTRAL if name_other else "") for i in range(n_wordings)]


def body(words: Sequence[str], labels: Sequence[str], order: str, wording: int = 1, other: str | None = None) -> str:
    """The instruction and the words (what the user says)."""
    return f"{instruction(labels, order, wording, other)}\n\n{WORDS_CUE}\n" + "\n".join(words)


def list_context(prompts, lead: str, words: Sequence[str], labels: Sequence[str], order: str, wording: int = 1,
                 other: str | None = None) -> str:
    """The prompt of a list in the model's prompt format (``lead``: the context's stimulus text)."""
    text = body(words, labels, order, wording, other)
    return prompts.context(lead, text if prompts.fmt.is_chat else f"{text}\n\n{ANSWER_CUE}")


def step_text(prompts, word: str, first: bool) -> str:
    """The text before the choice at one word: a new line (bare as the first tokens of a chat answer), the word and
    a colon."""
    return (f"{word}:" if first and prompts.fmt.kind == "chat" else f"\n{word}:")


def options(labels: Sequence[str], other: str) -> tuple[str, str, str]:
    """The options at each position, each with its leading space (it follows ``word:``)."""
    return (f" {labels[0]}", f" {labels[1]}", f" {other}")


def chain(prompts, lead: str, wl: WordList, labels: Sequence[str], other: str, name_other: bool = True):
    """The chain of one list: its prompt, then per word the step text and the three options."""
    from qclm.engine.requests import ChainRequest, ChainStep

    opts = options(labels, other)
    named = other if name_other else None
    return ChainRequest(list_context(prompts, lead, wl.words, labels, wl.order, wl.wording, named),
                        tuple(ChainStep(step_text(prompts, w, i == 0), opts) for i, w in enumerate(wl.words)))


def single(prompts, lead: str, word: str, labels: Sequence[str], other: str, order: str, wording: int = 1,
           name_other: bool = True):
    """The forced choice of one word alone: the list prompt for a list of one word, up to its answer."""
    from qclm.engine.requests import ChoiceRequest

    named = other if name_other else None
    return ChoiceRequest(list_context(prompts, lead, [word], labels, order, wording, named)
                         + step_text(prompts, word, True), options(labels, other))


def story_context(prompts, lead: str, words: Sequence[str]) -> str:
    text = STORY_INSTRUCTION.format(words=", ".join(words))
    return prompts.context(lead, text if prompts.fmt.is_chat else f"{text}\n\n{STORY_CUE}")


def rating_request(prompts, lead: str, story: str):
    """The 1-10 tragedy rating of a story as a forced choice (expected value over the options' probabilities)."""
    from qclm.engine.requests import ChoiceRequest

    text = RATING_INSTRUCTION.format(story=story.strip())
    context = prompts.context(lead, text if prompts.fmt.is_chat else f"{text}\n\n{RATING_CUE}")
    return ChoiceRequest(context, tuple(prompts.continuation(o) for o in RATING_OPTIONS),
                         values=tuple(float(v) for v in RATING_VALUES))
