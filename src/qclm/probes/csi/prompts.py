"""The CSI prompts and the shuffled lists (no torch).

The instruction is written for this project (the same task as the paper's, not its sentence). In ``list`` mode the
model sees the instruction and the n words of a list, then answers line by line, ``word: label``: each answer is a
forced choice at that position between the two labels and ``other``, and the chosen answer is appended before the
next word (a :class:`~qclm.engine.requests.ChainRequest`), so the answers so far are part of every later choice,
as in the paper. ``single`` mode is the same prompt for a list of one word (a
:class:`~qclm.engine.requests.ChoiceRequest`).

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

#: what the instruction asks (the labels in the order this repetition names them, ``{first}`` and ``{second}``)
INSTRUCTION = ("For each word in the list below, decide whether it makes you think of {first} or of {second}. "
               "Go through the words in the order given and answer one word per line: the word, a colon and "
               "your choice.")
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
    order (``AB``: the configured order; ``BA``: swapped), index among the repetition's lists (1-based) and words."""

    part: str
    repetition: int
    order: str
    index: int
    words: tuple[str, ...]


def label_order(repetition: int, swap: str) -> str:
    """``AB`` or ``BA`` for a repetition (1-based)."""
    return "BA" if swap == "alternate" and repetition % 2 == 0 else "AB"


def shuffled_lists(words: Sequence[str], part: str, repetitions: int, list_size: int, seed: int, probe: str,
                   swap: str = "alternate") -> list[WordList]:
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
            out.append(WordList(part, r, label_order(r, swap), i + 1, tuple(order[at:at + size])))
            at += size
    return out


def body(words: Sequence[str], labels: Sequence[str], order: str) -> str:
    """The instruction and the words (what the user says)."""
    first, second = (labels[0], labels[1]) if order == "AB" else (labels[1], labels[0])
    return f"{INSTRUCTION.format(first=first, second=second)}\n\n{WORDS_CUE}\n" + "\n".join(words)


def list_context(prompts, lead: str, words: Sequence[str], labels: Sequence[str], order: str) -> str:
    """The prompt of a list in the model's prompt format (``lead``: the context's stimulus text)."""
    text = body(words, labels, order)
    return prompts.context(lead, text if prompts.fmt.is_chat else f"{text}\n\n{ANSWER_CUE}")


def step_text(prompts, word: str, first: bool) -> str:
    """The text before the choice at one word: a new line (bare as the first tokens of a chat answer), the word and
    a colon."""
    return (f"{word}:" if first and prompts.fmt.kind == "chat" else f"\n{word}:")


def options(labels: Sequence[str], other: str) -> tuple[str, str, str]:
    """The options at each position, each with its leading space (it follows ``word:``)."""
    return (f" {labels[0]}", f" {labels[1]}", f" {other}")


def chain(prompts, lead: str, wl: WordList, labels: Sequence[str], other: str):
    """The chain of one list: its prompt, then per word the step text and the three options."""
    from qclm.engine.requests import ChainRequest, ChainStep

    opts = options(labels, other)
    return ChainRequest(list_context(prompts, lead, wl.words, labels, wl.order),
                        tuple(ChainStep(step_text(prompts, w, i == 0), opts) for i, w in enumerate(wl.words)))


def single(prompts, lead: str, word: str, labels: Sequence[str], other: str, order: str):
    """The forced choice of one word alone: the list prompt for a list of one word, up to its answer."""
    from qclm.engine.requests import ChoiceRequest

    return ChoiceRequest(list_context(prompts, lead, [word], labels, order) + step_text(prompts, word, True),
                         options(labels, other))


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
