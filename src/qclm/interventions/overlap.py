"""How much of an instrument's scored vocabulary a fine-tuning corpus holds (docs/interventions.md; no torch).

A shift of an instrument after fine-tuning on a corpus mixes a change of the trait with exposure to the words the
instrument scores: its construct terms (S+ and S-, the ``cterms`` of a Likert or entailment item), whose
probabilities the item scores read. :func:`overlap_table` counts, per corpus and instrument, the texts that hold
an S+ term and the texts that hold an S- term, and which terms; the intervention tables carry it beside every
shift (``intervention_overlap.csv``; ``overlap_plus`` / ``overlap_minus`` in ``intervention.csv``), so that a
shift beyond a control can be read against the exposure both corpora give.

A term is found where it occurs as a phrase on word boundaries, case-insensitively (:func:`qclm.corpus.found_terms`:
``on edge`` in "I am on edge all day"; not ``low`` in "slowly").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import pandas as pd

from qclm.corpus import Corpus, found_terms

COLUMNS = ["intervention", "corpus", "n_texts", "probe", "instrument", "plus_texts", "plus_share", "minus_texts",
           "minus_share", "plus_terms", "minus_terms"]


def _count(texts: Iterable[str], terms: tuple[str, ...]) -> tuple[int, Counter[str]]:
    hits = 0
    counts: Counter[str] = Counter()
    for text in texts:
        found = found_terms(text, terms)
        hits += bool(found)
        counts.update(found)
    return hits, counts


def _listed(counts: Counter) -> str:
    return "; ".join(f"{term} ({n})" for term, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def overlap_table(corpora: Mapping[str, Corpus], terms: Mapping[tuple[str, str], tuple[tuple[str, ...],
                                                                                      tuple[str, ...]]]
                  ) -> pd.DataFrame:
    """One row per intervention x (probe, instrument): the corpus's texts with an S+ term, with an S- term, their
    shares, and the terms found with the number of texts each occurs in (``corpora``: intervention name ->
    :class:`qclm.corpus.Corpus`; ``terms``: (probe, instrument) -> (S+ terms, S- terms))."""
    rows = []
    for name, corpus in corpora.items():
        texts = [str(t) for t in corpus.texts]  # a chat exchange: its user message and answer
        for (probe, instrument), (plus, minus) in terms.items():
            p_hits, p_terms = _count(texts, tuple(plus))
            m_hits, m_terms = _count(texts, tuple(minus))
            rows.append({"intervention": name, "corpus": corpus.path, "n_texts": len(texts), "probe": probe,
                         "instrument": instrument, "plus_texts": p_hits, "plus_share": p_hits / len(texts),
                         "minus_texts": m_hits, "minus_share": m_hits / len(texts), "plus_terms": _listed(p_terms),
                         "minus_terms": _listed(m_terms)})
    return pd.DataFrame(rows, columns=COLUMNS)
