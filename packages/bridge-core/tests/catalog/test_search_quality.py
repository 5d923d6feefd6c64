"""Search quality on a labelled query set over real servers' tool lists, alone and among
hundreds of synthetic tools."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest
from bridge_core.catalog import DEFAULT_THRESHOLD, ToolDoc, ToolIndex

# Natural phrasings an LLM writes, over ten real servers, with every acceptable answer.
NATURAL = json.loads((Path(__file__).parent / "fixtures/search_queries.json").read_text())[
    "queries"
]
NATURAL_TOP1_FLOOR = 0.85  # measured 0.88 (66/75); 0.48 before stems, synonyms and idf
NATURAL_TOP3_FLOOR = 0.95  # measured 0.96 (72/75); 0.60 before

# query -> acceptable (server, tool) answers. Typos, word order and partial words on purpose.
LABELLED: list[tuple[str, set[tuple[str, str]]]] = [
    ("list files", {("filesystem", "list_directory"), ("filesystem", "list_directory_with_sizes")}),
    ("ehco", {("everything", "echo")}),
    ("echo message", {("everything", "echo")}),
    ("read file", {("filesystem", "read_text_file"), ("filesystem", "read_file")}),
    ("file read", {("filesystem", "read_text_file"), ("filesystem", "read_file")}),
    ("write file", {("filesystem", "write_file")}),
    ("current time", {("time", "get_current_time")}),
    ("convert timezone", {("time", "convert_time")}),
    ("what time is it in tokyo", {("time", "get_current_time"), ("time", "convert_time")}),
    ("commit changes", {("git", "git_commit")}),
    ("git status", {("git", "git_status")}),
    ("commit history", {("git", "git_log")}),
    ("create branch", {("git", "git_create_branch")}),
    ("switch branch", {("git", "git_checkout")}),
    ("stage files", {("git", "git_add")}),
    ("unstage", {("git", "git_reset")}),
    ("diff", {("git", "git_diff"), ("git", "git_diff_unstaged"), ("git", "git_diff_staged")}),
    ("add numbers", {("everything", "get-sum")}),
    ("sum", {("everything", "get-sum")}),
    ("tiny image", {("everything", "get-tiny-image")}),
    ("environment variables", {("everything", "get-env")}),
    ("make directory", {("filesystem", "create_directory")}),
    ("rename file", {("filesystem", "move_file")}),
    ("move file", {("filesystem", "move_file")}),
    ("find files matching pattern", {("filesystem", "search_files")}),
    ("file size metadata", {("filesystem", "get_file_info")}),
    ("knowledge graph entities", {("memory", "create_entities"), ("memory", "read_graph")}),
    ("delete entity", {("memory", "delete_entities")}),
    ("add observation", {("memory", "add_observations")}),
    ("search nodes", {("memory", "search_nodes")}),
    ("compress file gzip", {("everything", "gzip-file-as-resource")}),
    ("long running operation progress", {("everything", "trigger-long-running-operation")}),
    ("direcotry tree", {("filesystem", "directory_tree")}),
    ("tree directory", {("filesystem", "directory_tree")}),
    ("edit file", {("filesystem", "edit_file")}),
    ("structured content", {("everything", "get-structured-content")}),
    ("read multiple files", {("filesystem", "read_multiple_files")}),
    ("allowed directories", {("filesystem", "list_allowed_directories")}),
    ("show commit", {("git", "git_show")}),
    ("list branches", {("git", "git_branch")}),
    ("curent tim", {("time", "get_current_time")}),
    ("multiple read", {("filesystem", "read_multiple_files")}),
]
# Nothing configured does any of this: every hit would be junk.
UNRELATED = [
    "send slack message",
    "weather forecast",
    "translate to french",
    "xyzzy",
    "play music",
    "book a flight",
    "stock price",
    "email",
]

TOP1_FLOOR = 0.80  # measured 0.86 (36/42) over ten servers; 0.81 before over five
TOP5_FLOOR = 0.95  # measured 1.00 (42/42); 0.93 before


def accuracy(index: ToolIndex) -> tuple[float, float, list[str]]:
    top1 = top5 = 0
    failures = []
    for query, answers in LABELLED:
        found = [(h.server, h.tool) for h in index.search(query, limit=5)]
        top1 += bool(found) and found[0] in answers
        top5 += any(f in answers for f in found)
        if not any(f in answers for f in found):
            failures.append(f"{query!r} -> {found[:3]}")
    return top1 / len(LABELLED), top5 / len(LABELLED), failures


def natural_accuracy(index: ToolIndex) -> tuple[float, float, list[str]]:
    top1 = top3 = 0
    misses = []
    for entry in NATURAL:
        expected = {tuple(answer.split("/", 1)) for answer in entry["expect"]}
        found = [(h.server, h.tool) for h in index.search(entry["query"], limit=3)]
        top1 += bool(found) and found[0] in expected
        top3 += any(f in expected for f in found)
        if not found or found[0] not in expected:
            misses.append(f"{entry['query']!r} -> {found}")
    return top1 / len(NATURAL), top3 / len(NATURAL), misses


def test_the_labelled_set_covers_every_real_server_with_enough_queries(
    real_docs: list[ToolDoc],
) -> None:
    tools = {f"{d.server}/{d.name}" for d in real_docs}
    answers = {a for entry in NATURAL for a in entry["expect"]}
    assert len(NATURAL) >= 60
    assert answers <= tools, answers - tools
    assert {a.split("/")[0] for a in answers} == {d.server for d in real_docs}


@pytest.mark.parametrize("synthetic", [0, 1000])
def test_natural_queries_find_the_right_tool_among_real_servers(
    real_docs: list[ToolDoc], synthetic: int
) -> None:
    top1, top3, misses = natural_accuracy(ToolIndex([*synthetic_docs(synthetic), *real_docs]))
    print(f"natural, {synthetic} synthetic: top-1 {top1:.3f} top-3 {top3:.3f}")
    print("misses (first hit is wrong):\n  " + "\n  ".join(misses))
    assert top1 >= NATURAL_TOP1_FLOOR, misses
    assert top3 >= NATURAL_TOP3_FLOOR, misses


def test_the_three_queries_of_the_issue(real_docs: list[ToolDoc]) -> None:
    index = ToolIndex(real_docs)
    assert index.search("list files", limit=1)[0].tool == "list_directory"
    remembered = index.search("remember a fact about a person", limit=1)
    assert remembered[0].tool in {"create_entities", "add_observations"}
    # github's list_commits ("Get list of commits") is as right; git_log must be among the hits.
    assert "git_log" in [h.tool for h in index.search("show commit history", limit=3)]


def test_labelled_queries_find_the_right_tool_first_on_real_tool_lists(
    real_docs: list[ToolDoc],
) -> None:
    top1, top5, failures = accuracy(ToolIndex(real_docs))
    print(f"top-1 {top1:.2f} top-5 {top5:.2f}; misses: {failures}")
    assert top1 >= TOP1_FLOOR, failures
    assert top5 >= TOP5_FLOOR, failures


@pytest.mark.parametrize("query", UNRELATED)
def test_unrelated_queries_return_nothing_above_the_threshold(
    real_docs: list[ToolDoc], query: str
) -> None:
    assert ToolIndex(real_docs).search(query) == []


def test_typo_word_order_and_partial_words_still_find_the_tool(real_docs: list[ToolDoc]) -> None:
    index = ToolIndex(real_docs)
    for query, expected in [
        ("ehco", "echo"),
        ("file text read", "read_text_file"),
        ("direcotry tree", "directory_tree"),
        ("allowed dirs", "list_allowed_directories"),
        ("get-sum", "get-sum"),
        ("getCurrentTime", "get_current_time"),
    ]:
        assert index.search(query, limit=1)[0].tool == expected, query


def test_a_word_in_the_name_outranks_the_same_word_in_a_description() -> None:
    docs = [
        ToolDoc("a", "fetch_page", "Download a web page; can archive it afterwards"),
        ToolDoc("b", "archive", "Store a copy of something"),
    ]
    hits = ToolIndex(docs).search("archive")
    assert [h.tool for h in hits] == ["archive", "fetch_page"]


def test_hits_carry_server_tool_description_and_descending_scores(
    real_docs: list[ToolDoc],
) -> None:
    hits = ToolIndex(real_docs).search("read file", limit=3)
    assert len(hits) == 3
    assert hits[0].to_json() == {
        "server": "filesystem",
        "tool": "read_file",
        "description": "Read the complete contents of a file as text. "
        "DEPRECATED: Use read_text_file instead.",
        "score": 100.0,
    }
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score >= DEFAULT_THRESHOLD for h in hits)


def test_limit_and_blank_queries(real_docs: list[ToolDoc]) -> None:
    index = ToolIndex(real_docs)
    assert len(index.search("file", limit=2)) == 2
    assert index.search("file", limit=0) == []
    assert index.search("   ") == []
    assert index.search("!!!") == []
    assert ToolIndex([]).search("file") == []


_VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "fetch",
    "sync",
    "export",
    "import",
    "archive",
    "scan",
    "render",
]
_NOUNS = [
    "invoice",
    "customer",
    "order",
    "ticket",
    "sprint",
    "report",
    "metric",
    "alert",
    "dashboard",
    "contact",
    "lead",
    "deal",
    "campaign",
    "shipment",
    "warehouse",
    "payroll",
    "budget",
    "forecast",
    "playlist",
    "podcast",
]
_EXTRA = ["alpha", "beta", "gamma", "delta", "omega", "prime", "neo", "ultra", "mini", "pro"]


def synthetic_docs(count: int, seed: int = 7) -> list[ToolDoc]:
    """Plausible SaaS-style tools (none about files, time, git, memory or echoing)."""
    rng = random.Random(seed)
    docs: list[Any] = []
    while len(docs) < count:
        verb, noun, extra = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_EXTRA)
        server = f"{rng.choice(_EXTRA)}-{rng.choice(['crm', 'erp', 'ops', 'media'])}"
        name = f"{verb}_{noun}_{extra}_{len(docs)}"
        description = f"{verb.capitalize()} a {noun} in the {extra} workspace of {server}."
        docs.append(ToolDoc(server, name, description))
    return docs


@pytest.mark.parametrize("size", [300, 1000])
def test_real_tools_are_still_found_among_hundreds_of_synthetic_ones(
    real_docs: list[ToolDoc], size: int
) -> None:
    index = ToolIndex([*synthetic_docs(size), *real_docs])
    top1, top5, failures = accuracy(index)
    print(f"{size} synthetic: top-1 {top1:.2f} top-5 {top5:.2f}; misses: {failures}")
    assert top1 >= TOP1_FLOOR, failures
    assert top5 >= TOP5_FLOOR, failures


def test_synthetic_tools_are_found_by_their_own_words() -> None:
    docs = synthetic_docs(1000)
    index = ToolIndex(docs)
    target = docs[500]
    verb, noun, extra, _ = target.name.split("_")
    hits = index.search(f"{noun} {verb} {extra}", limit=5)
    assert hits
    top = hits[0].tool
    assert (verb, noun, extra) == tuple(top.split("_")[:3])


def test_a_huge_query_is_cut_not_choked_on(real_docs: list[ToolDoc]) -> None:
    hits = ToolIndex(real_docs).search("read file " + "zq " * 500_000)
    assert hits[0].tool == "read_file"


def test_the_search_examples_in_the_docs_are_what_search_returns() -> None:
    root = Path(__file__).resolve().parents[4]
    script = root / "scripts/search_examples.py"
    spec = importlib.util.spec_from_file_location("search_examples", script)
    assert spec is not None
    assert spec.loader is not None
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    doc = (root / "docs/search.md").read_text()
    assert examples.EXAMPLE.search(doc), "docs/search.md lost its search examples"
    assert examples.render(doc) == doc, "stale: run scripts/search_examples.py"
