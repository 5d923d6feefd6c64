"""Tool search: term matching weighted like BM25, tolerant of typos, word forms and everyday words.

Each tool is indexed as weighted terms: Porter2 stems of the words of its name (weight 1),
server name (0.7), description (first 300 characters, 0.65) and parameter names (0.4); names are
split at ``_``, ``-`` and camelCase boundaries. A query loses filler words, and each remaining
word is matched by, in decreasing strength: its own stem, an index word it is a misspelling of
(one or two edits, same first letter: "ehco" -> "echo"), everyday synonyms (``_vocabulary``:
"folder" -> "directory", "history" -> "log"), and index words it is a prefix of ("dir" ->
"directory").

A tool's score (0-100) is the share of the query it answers: the sum, over query words, of the
word's rarity (BM25 ``idf``, so "file" in a file server counts little and "gzip" a lot) times
how well the tool matches it, divided by the sum of the rarities, scaled down a little when the
query leaves words of the tool's *name* uncovered, so ``read_file`` ranks before
``read_text_file`` for "read file". A query word no tool has still counts in the divisor: "send
slack message" scores low everywhere even though one tool has a ``message`` parameter.

Only tools sharing a term with the query are scored (a walk over the postings of its terms), so
a query costs little however many tools there are (``bench/search_latency.py``).
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import snowballstemmer
from rapidfuzz import process, utils
from rapidfuzz.distance import OSA

from bridge_core.catalog._docs import ToolDoc
from bridge_core.catalog._vocabulary import FILLER, SYNONYMS

__all__ = ["DEFAULT_THRESHOLD", "MAX_QUERY_CHARS", "SearchHit", "ToolIndex", "normalise"]

DEFAULT_THRESHOLD = 23.0
"""Hits scored below this are dropped (``docs/search.md`` has the measured gap)."""

MAX_QUERY_CHARS = 1000
"""Queries come from sandbox code: longer ones are cut (the catalog refuses them outright)."""
_MAX_QUERY_WORDS = 16  # each unknown word costs a pass over the vocabulary
_MAX_PARAMETERS = 30  # parameter names indexed per tool (schemas come from upstream servers)
_MAX_PREFIX_EXPANSION = 50  # index words one query prefix may stand for

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Long descriptions dilute the match with incidental words; the first sentences carry the
# meaning.
_DESCRIPTION_CHARS = 300
# How much a term counts, by where the tool has it.
_NAME, _SERVER, _DESCRIPTION, _PARAMETER = 1.0, 0.7, 0.65, 0.4
# How much a query word's match counts, by how it matched.
_CORRECTED = 0.9
SYNONYM_WEIGHT = 0.75
_PREFIX = 0.7
# Share of the score kept for covering the tool's whole name (ranks read_file before
# read_text_file for "read file"); it scales the query's coverage, so it breaks near-ties
# rather than rewarding a tool for one short name word.
_NAME_SHARE = 0.25
# Query words found nowhere count as much as a word found in this share of the tools.
_UNKNOWN_DF_SHARE = 0.05
# Query words missing from the index are replaced by an index word within one edit (two from
# this length on): "ehco" -> "echo", "direcotry" -> "directory".
_CORRECTION_MIN_LENGTH = 4  # shorter words have too many neighbours at one edit
_TWO_EDITS_MIN_LENGTH = 7
_PREFIX_MIN_LENGTH = 3  # "a" or "in" as prefixes would select nearly every tool

_STEMMERS = threading.local()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    # A stemmer keeps the word it works on in its own fields, and indexes are built and searched
    # in worker threads (``_catalog``): one stemmer per thread.
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


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


def _words(text: str) -> list[str]:
    return normalise(text).split()


def _parameters(schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    return [name for name in list(properties)[:_MAX_PARAMETERS] if isinstance(name, str)]


def _idf(df: int, total: int) -> float:
    """BM25's inverse document frequency (always positive)."""
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


class ToolIndex:
    """An immutable search index over tool docs (build a new one when a tool list changes)."""

    def __init__(self, docs: Iterable[ToolDoc], *, threshold: float = DEFAULT_THRESHOLD) -> None:
        self._docs = list(docs)
        self._threshold = threshold
        # term -> {tool index: weight}; a term's weight in a tool is its best field's.
        postings: dict[str, dict[int, float]] = {}
        self._name_terms: list[frozenset[str]] = []
        spellings: set[str] = set()
        for index, doc in enumerate(self._docs):
            fields = [
                (_words(doc.name), _NAME),
                (_words(doc.server), _SERVER),
                (_words(doc.description[:_DESCRIPTION_CHARS]), _DESCRIPTION),
                ([w for p in _parameters(doc.input_schema) for w in _words(p)], _PARAMETER),
            ]
            for words, weight in fields:
                spellings.update(words)
                for word in words:
                    tools = postings.setdefault(_stem(word), {})
                    if tools.get(index, 0.0) < weight:
                        tools[index] = weight
            self._name_terms.append(frozenset(_stem(w) for w in fields[0][0]))
        self._postings = postings
        self._terms = sorted(postings)
        self._spellings = sorted(spellings)
        total = len(self._docs)
        self._idf = {term: _idf(len(tools), total) for term, tools in postings.items()}
        self._unknown_idf = _idf(max(1, round(total * _UNKNOWN_DF_SHARE)), total)

    def __len__(self) -> int:
        return len(self._docs)

    def _correct(self, word: str) -> str | None:
        """The index's own spelling of a misspelt query word ("ehco" -> "echo"), if close.

        Typos keep the first letter and are one or two edits (a swap counts as one) away;
        anything looser turns unrelated words into index words ("weather" -> "either").
        """
        if len(word) < _CORRECTION_MIN_LENGTH:
            return None
        start = bisect.bisect_left(self._spellings, word[0])
        end = bisect.bisect_left(self._spellings, chr(ord(word[0]) + 1))
        match = process.extractOne(
            word,
            self._spellings[start:end],
            scorer=OSA.distance,
            score_cutoff=1 if len(word) < _TWO_EDITS_MIN_LENGTH else 2,
        )
        return None if match is None else match[0]

    def _prefixed(self, word: str) -> list[str]:
        """Index terms a partial word may stand for ("dir" -> "directori")."""
        if len(word) < _PREFIX_MIN_LENGTH:
            return []
        start = bisect.bisect_left(self._terms, word)
        found = []
        for term in self._terms[start : start + _MAX_PREFIX_EXPANSION]:
            if not term.startswith(word):
                break
            if term != word:
                found.append(term)
        return found

    def _alternatives(self, word: str) -> list[tuple[tuple[str, ...], float]]:
        """What a query word may match, as (terms that must all match, strength)."""
        stem = _stem(word)
        found: list[tuple[tuple[str, ...], float]] = []
        if stem in self._postings:
            found.append(((stem,), 1.0))
        elif (corrected := self._correct(word)) is not None:
            found.append(((_stem(corrected),), _CORRECTED))
        for synonym in SYNONYMS.get(word, SYNONYMS.get(stem, ())):
            terms = tuple(_stem(w) for w in synonym.split())
            if terms != (stem,) and all(t in self._postings for t in terms):
                found.append((terms, SYNONYM_WEIGHT))
        if not found:
            found = [((term,), _PREFIX) for term in self._prefixed(word)]
            if not found and stem != word:
                found = [((term,), _PREFIX) for term in self._prefixed(stem)]
        return found

    def _rarity(self, alternatives: list[tuple[tuple[str, ...], float]]) -> float:
        """How much a query word counts: the idf of its own term, else of its best stand-in."""
        if not alternatives:
            return self._unknown_idf
        terms, _ = alternatives[0]
        return max(self._idf[t] for t in terms)

    def scores(self, query: str) -> dict[int, float]:
        """The score (0-100) of each candidate tool, by index (for tests and tuning)."""
        words = normalise(query[:MAX_QUERY_CHARS]).split()[:_MAX_QUERY_WORDS]
        if not words or not self._docs:
            return {}
        words = list(dict.fromkeys(w for w in words if w not in FILLER)) or words
        answered: dict[int, float] = {}
        named: dict[int, set[str]] = {}
        divisor = 0.0
        for word in words:
            alternatives = self._alternatives(word)
            rarity = self._rarity(alternatives)
            divisor += rarity
            best: dict[int, float] = {}
            for terms, strength in alternatives:
                for index, weight in self._match(terms).items():
                    value = weight * strength
                    if value > best.get(index, 0.0):
                        best[index] = value
                    named.setdefault(index, set()).update(
                        t for t in terms if t in self._name_terms[index]
                    )
            for index, value in best.items():
                answered[index] = answered.get(index, 0.0) + rarity * value
        return {
            index: 100
            * value
            / divisor
            * (1 - _NAME_SHARE + _NAME_SHARE * len(named[index]) / len(self._name_terms[index]))
            for index, value in answered.items()
            if self._name_terms[index]
        }

    def _match(self, terms: tuple[str, ...]) -> dict[int, float]:
        """Tools having every term, with the weakest term's weight (a phrase counts as its
        least prominent word)."""
        first, *rest = terms
        found = dict(self._postings[first])
        for term in rest:
            tools = self._postings[term]
            found = {i: min(w, tools[i]) for i, w in found.items() if i in tools}
        return found

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
