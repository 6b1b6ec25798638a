"""Prompt formats (method.md section 3b): the text a model scores and the continuation it scores, built in one
place for the scoring jobs and for ``qclm render``, so what ``render`` shows is what is scored.

A variant under a context is an item prefix (the template up to the answer, with the cterm filled in), an
intensifier phrase, and the context's stimulus lead (stimulus texts with their separators; empty for vanilla).
The model table's ``prompt_format`` column says how they become text:

``raw`` (default)
    context = lead + item prefix; continuation = " " + phrase (the paper's form).
``chat``
    the lead and the item prefix form the user message; the model's own chat template renders it with the
    generation prompt; the continuation is the phrase as the first tokens of the assistant's answer.
``chat_preamble``
    as ``chat``, then an answer preamble (``engine.answer_preamble``, default "My answer is") opens the
    assistant's answer; continuation = " " + phrase.

``engine.stimulus_placement``: ``user`` (the lead inside the user message, default) or ``prefix`` (the lead as
raw text before the chat-formatted item, as the authors' public code does).

Special tokens: a chat template that writes the beginning-of-sequence token itself (Gemma, Llama 3) would get a
second one from the tokenizer; the rendered text drops the template's copy when the tokenizer adds it, so the
token ids equal ``tokenizer.apply_chat_template(..., tokenize=True)`` (tests/test_prompts.py checks this).
"""

from __future__ import annotations

from dataclasses import dataclass

from qclm.questionnaire import CONTINUATION_LEAD
from qclm.settings import DEFAULT_ANSWER_PREAMBLE, ENGINE, STIMULUS_PLACEMENTS, defaults

#: the model table's ``prompt_format`` column
PROMPT_FORMATS = ("raw", "chat", "chat_preamble")


class ChatTemplateError(ValueError):
    """A chat prompt format for a tokenizer without a chat template."""


@dataclass(frozen=True)
class PromptFormat:
    kind: str = "raw"
    placement: str = defaults(ENGINE)["stimulus_placement"]
    preamble: str = DEFAULT_ANSWER_PREAMBLE
    system: str = ""  # a chat format's system message (the model table's ``system_prompt``; empty: none sent)

    @classmethod
    def from_settings(cls, kind: str, engine: dict, system: str = "") -> "PromptFormat":
        """The format of one model (its ``prompt_format`` and ``system_prompt``) under the run's engine settings."""
        if kind not in PROMPT_FORMATS:
            raise ValueError(f"prompt format must be one of {', '.join(PROMPT_FORMATS)}, got {kind!r}")
        placement = engine.get("stimulus_placement", cls.placement)
        if placement not in STIMULUS_PLACEMENTS:
            raise ValueError(f"stimulus placement must be one of {', '.join(STIMULUS_PLACEMENTS)}, got {placement!r}")
        return cls(kind, placement, engine.get("answer_preamble", DEFAULT_ANSWER_PREAMBLE), system)

    def messages(self, user: str, assistant: str | None = None) -> list[dict[str, str]]:
        """The chat messages of one prompt (or one exchange): the system message where the row gives one."""
        return ([{"role": "system", "content": self.system}] if self.system else []) + [
            {"role": "user", "content": user}] + ([{"role": "assistant", "content": assistant}]
                                                  if assistant is not None else [])

    @property
    def is_chat(self) -> bool:
        return self.kind != "raw"

    def provenance(self) -> dict:
        """What the Parquet metadata records about the prompt format."""
        out = {"prompt_format": self.kind}
        if self.is_chat:
            out["stimulus_placement"] = self.placement
        if self.kind == "chat_preamble":
            out["answer_preamble"] = self.preamble
        if self.system:
            out["system_prompt"] = self.system
        return out


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def _adds_bos(tokenizer) -> str | None:
    """The BOS text the tokenizer prepends itself (add_special_tokens=True), or None."""
    bos = getattr(tokenizer, "bos_token", None)
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos is None or bos_id is None:
        return None
    ids = tokenizer("", add_special_tokens=True)["input_ids"]
    return bos if ids[:1] == [bos_id] else None


class PromptBuilder:
    """Renders (context text, continuation text) for variants under one tokenizer and prompt format; chat
    renderings are cached per user message (the intensifiers of one item prefix share it)."""

    def __init__(self, tokenizer, fmt: PromptFormat):
        if fmt.is_chat and not has_chat_template(tokenizer):
            raise ChatTemplateError(f"prompt format {fmt.kind} needs a chat template, and this tokenizer "
                                    f"({type(tokenizer).__name__}) has none")
        self.tokenizer = tokenizer
        self.fmt = fmt
        self._bos = _adds_bos(tokenizer) if fmt.is_chat else None
        self._cache: dict[str, str] = {}

    def _chat(self, user: str) -> str:
        text = self._cache.get(user)
        if text is None:
            text = self.tokenizer.apply_chat_template(self.fmt.messages(user), tokenize=False,
                                                      add_generation_prompt=True)
            if self._bos and text.startswith(self._bos):
                text = text[len(self._bos):]  # the tokenizer adds it again: one BOS, not two
            self._cache[user] = text
        return text

    def exchange(self, user: str, assistant: str) -> str:
        """A whole chat exchange (one user message and the assistant's answer) as the model's chat template
        writes it, with the BOS rule of :meth:`context` (fine-tuning corpora of chat exchanges)."""
        text = self.tokenizer.apply_chat_template(self.fmt.messages(user, assistant), tokenize=False)
        return text[len(self._bos):] if self._bos and text.startswith(self._bos) else text

    def context(self, lead: str, item_prefix: str) -> str:
        """The context text of one variant: its stimulus lead and item prefix in this format."""
        if not self.fmt.is_chat:
            return lead + item_prefix
        if self.fmt.placement == "user":
            text = self._chat(lead + item_prefix)
        else:
            text = lead + self._chat(item_prefix)
        return text + self.fmt.preamble if self.fmt.kind == "chat_preamble" else text

    def continuation(self, intensifier: str) -> str:
        """The scored text: the phrase with its leading space, or, as the first tokens of a chat answer, bare."""
        return intensifier if self.fmt.kind == "chat" else CONTINUATION_LEAD + intensifier

    def build(self, lead: str, variants) -> tuple[list[str], list[str]]:
        """(contexts, continuations) of the variants of one context."""
        return ([self.context(lead, v.prefix) for v in variants], [self.continuation(v.intensifier) for v in variants])
