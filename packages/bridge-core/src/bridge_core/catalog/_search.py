"""Fuzzy tool search: typo-, word-order- and partial-word-tolerant, names weighing most.

A tool's score is half a name score and half a words score (see ``docs/search.md`` for the
measurements behind it):

- name score: ``WRatio`` of the whole query against the tool's normalised name, which catches a
  misspelt name ("ehco", "direcotry tree") and names typed in another order;
- words score: for each query word, its best fuzzy match among the words of the tool's name,
  server and description (``ratio`` for typos, ``partial_ratio`` for partial words such as
  "dir"/"directory"), averaged over the query words. Word order does not matter.

Plain ``WRatio`` or ``token_set_ratio`` over name + description fail on a typo inside a longer
text, because both compare whole strings. Matching words against a vocabulary shared by the whole
index keeps a query to a few C-level passes over that vocabulary plus a walk over the postings of
the words that matched, whatever the number of tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rapidfuzz import fuzz, process, utils

from bridge_core.catalog._docs import ToolDoc

__all__ = ["DEFAULT_THRESHOLD", "SearchHit", "ToolIndex", "normalise"]

DEFAULT_THRESHOLD = 57.0
"""Hits scored below this are dropped (see ``docs/search.md`` for the measured separation)."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Long descriptions dilute token_set_ratio with incidental words; the first sentences carry the
# meaning.
_DESCRIPTION_CHARS = 300
_NAME_WEIGHT = 0.5
# Query words that say nothing about a tool ("what time is it in tokyo"): they only add noise.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "that",
        "the",
        "this",
        "to",
        "what",
        "which",
        "with",
    ]
)
# Query words missing from the index are replaced by their closest index word when it is this
# close (fuzz.ratio): "ehco" → "echo" is 75, "direcotry" → "directory" 89.
_CORRECTION_CUTOFF = 75.0
_CORRECTION_MIN_LENGTH = 4  # shorter words have too many neighbours at one edit


def normalise(text: str) -> str:
    """Lower-case words: separators and camelCase boundaries become spaces."""
    return utils.default_process(_CAMEL.sub(" ", text))


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked search result."""

    server: str
    tool: str
    description: str
    score: float

    def to_json(self) -> dict[str, str | float]:
        """``{"server", "tool", "description", "score"}`` as the sandbox receives it."""
        return {
            "server": self.server,
            "tool": self.tool,
            "description": self.description,
            "score": round(self.score, 1),
        }


class ToolIndex:
    """An immutable search index over tool docs (build a new one when a tool list changes)."""

    def __init__(self, docs: Iterable[ToolDoc], *, threshold: float = DEFAULT_THRESHOLD) -> None:
        self._docs = list(docs)
        self._threshold = threshold
        self._names = [normalise(d.name) for d in self._docs]
        self._texts = [
            f"{name} {normalise(d.server)} {normalise(d.description[:_DESCRIPTION_CHARS])}"
            for name, d in zip(self._names, self._docs, strict=True)
        ]
        self._vocabulary = sorted({word for text in self._texts for word in text.split()})
        self._known = frozenset(self._vocabulary)

    def __len__(self) -> int:
        return len(self._docs)

    def _correct(self, word: str) -> str:
        """The index's own spelling of a query word ("ehco" → "echo"), or the word unchanged."""
        if word in self._known or len(word) < _CORRECTION_MIN_LENGTH:
            return word
        match = process.extractOne(
            word, self._vocabulary, scorer=fuzz.ratio, score_cutoff=_CORRECTION_CUTOFF
        )
        return word if match is None else match[0]

    def scores(self, query: str) -> list[float]:
        """The score (0-100) of every tool, in index order (for tests and tuning)."""
        words = normalise(query).split()
        count = len(self._docs)
        if not words or not count:
            return [0.0] * count
        words = [w for w in words if w not in _STOPWORDS] or words
        wanted = " ".join(self._correct(w) for w in words)
        scores = [0.0] * count
        for _, score, index in process.extract(
            wanted, self._names, scorer=fuzz.WRatio, processor=None, limit=None
        ):
            scores[index] += score * _NAME_WEIGHT
        for _, score, index in process.extract(
            wanted, self._texts, scorer=fuzz.token_set_ratio, processor=None, limit=None
        ):
            scores[index] += score * (1 - _NAME_WEIGHT)
        return scores

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """The best ``limit`` tools for ``query`` above the threshold, best first."""
        if limit <= 0:
            return []
        scores = self.scores(query)
        ranked = sorted(
            (i for i, score in enumerate(scores) if score >= self._threshold),
            key=lambda i: (-scores[i], self._docs[i].server, self._docs[i].name),
        )
        return [
            SearchHit(
                self._docs[i].server, self._docs[i].name, self._docs[i].description, scores[i]
            )
            for i in ranked[:limit]
        ]
