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

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from rapidfuzz import fuzz, process, utils

from bridge_core.catalog._docs import ToolDoc

__all__ = ["DEFAULT_THRESHOLD", "MAX_QUERY_CHARS", "SearchHit", "ToolIndex", "normalise"]

DEFAULT_THRESHOLD = 57.0
"""Hits scored below this are dropped. Measured on real tool lists: right answers ranked first
scored >= 71, unrelated queries <= 55 (``docs/search.md``)."""

MAX_QUERY_CHARS = 1000
"""Queries come from sandbox code: longer ones are cut (the catalog refuses them outright)."""
_MAX_QUERY_WORDS = 16  # each unknown word costs a pass over the vocabulary

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
_PREFIX_MIN_LENGTH = 3  # "a" or "in" as prefixes would select nearly every tool
_NAME_CUTOFF = 50.0  # fuzz.ratio of the whole query to a name: "ehco" / "echo" is 75
_MIN_COMMON = 50
_FALLBACK_CANDIDATES = 100


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
        postings: dict[str, list[int]] = {}
        for index, text in enumerate(self._texts):
            for word in set(text.split()):
                postings.setdefault(word, []).append(index)
        self._postings = postings
        self._vocabulary = sorted(postings)
        # A word found in this many tools narrows nothing down ("get", "file" in a file server).
        self._common = max(_MIN_COMMON, len(self._docs) // 4)

    def __len__(self) -> int:
        return len(self._docs)

    def _correct(self, word: str) -> str:
        """The index's own spelling of a query word ("ehco" → "echo"), or the word unchanged."""
        if word in self._postings or len(word) < _CORRECTION_MIN_LENGTH:
            return word
        match = process.extractOne(
            word, self._vocabulary, scorer=fuzz.ratio, score_cutoff=_CORRECTION_CUTOFF
        )
        return word if match is None else match[0]

    def _candidates(self, words: list[str], wanted: str) -> set[int]:
        """Tools that can score above the threshold: those sharing a word, or a word's prefix
        ("dir" → "directory"), with the query, and those whose name looks like the query.

        Scoring only these keeps a query fast however many tools there are; a tool outside
        this set has no word in common with the query, so both halves of its score are low.
        """
        found: set[int] = set()
        common: set[int] = set()
        for word in words:
            matched: list[int] = []
            if len(word) >= _PREFIX_MIN_LENGTH:
                start = bisect.bisect_left(self._vocabulary, word)
                for entry in self._vocabulary[start:]:
                    if not entry.startswith(word):
                        break
                    matched += self._postings[entry]
            else:
                matched = self._postings.get(word, [])
            (common if len(matched) > self._common else found).update(matched)
        for _, _, index in process.extract(
            wanted, self._names, scorer=fuzz.ratio, score_cutoff=_NAME_CUTOFF, limit=None
        ):
            found.add(index)
        if found or len(common) <= _FALLBACK_CANDIDATES:
            return found or common
        # Only very common words matched: keep the tools whose names are closest to the query
        # (one C-level pass) rather than fully scoring most of the index.
        pool = sorted(common)
        best = process.extract(
            wanted,
            [self._names[i] for i in pool],
            scorer=fuzz.WRatio,
            processor=None,
            limit=_FALLBACK_CANDIDATES,
        )
        return {pool[position] for _, _, position in best}

    def scores(self, query: str) -> dict[int, float]:
        """The score (0-100) of each candidate tool, by index (for tests and tuning)."""
        words = normalise(query[:MAX_QUERY_CHARS]).split()[:_MAX_QUERY_WORDS]
        if not words or not self._docs:
            return {}
        words = [w for w in words if w not in _STOPWORDS] or words
        words = [self._correct(w) for w in words]
        wanted = " ".join(words)
        scores = {}
        for index in self._candidates(words, wanted):
            name_score = fuzz.WRatio(wanted, self._names[index], processor=None)
            text_score = fuzz.token_set_ratio(wanted, self._texts[index], processor=None)
            scores[index] = name_score * _NAME_WEIGHT + text_score * (1 - _NAME_WEIGHT)
        return scores

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """The best ``limit`` tools for ``query`` above the threshold, best first."""
        if limit <= 0:
            return []
        scores = self.scores(query)
        ranked = sorted(
            (i for i, score in scores.items() if score >= self._threshold),
            key=lambda i: (-scores[i], self._docs[i].server, self._docs[i].name),
        )
        return [
            SearchHit(
                self._docs[i].server, self._docs[i].name, self._docs[i].description, scores[i]
            )
            for i in ranked[:limit]
        ]
