"""The words tool search treats specially: filler to ignore, and everyday words mapped to the
words tool authors use.

Models ask in everyday words ("remember a fact about a person", "show commit history", "make a
folder"); tool lists speak in their domain's terms ("entities", "observations", "log",
"directory"). The synonyms below are general programming and computer vocabulary, one entry per
everyday word, listing what tool descriptions say instead; they are not tied to any one server.
A synonym match counts for less than the word itself (``_search.SYNONYM_WEIGHT``), so a tool
using the query's own word still ranks first.
"""

from __future__ import annotations

__all__ = ["FILLER", "SYNONYMS"]

# Words that say nothing about which tool is meant ("what time is it in tokyo right now").
# fmt: off
FILLER = frozenset(
    [
        "a", "about", "all", "an", "and", "another", "any", "are", "as", "at", "be", "been", "by",
        "can", "certain", "could", "do", "does", "for", "from", "have", "how", "i", "in", "into",
        "is", "it", "its", "just", "let", "like", "me", "my", "need", "now", "of", "on", "or",
        "other", "our", "particular", "please", "right", "s", "should", "so", "some", "than",
        "that", "the", "their", "them", "then", "there", "these", "this", "those", "to", "up",
        "us", "using", "via", "want", "was", "we", "what", "when", "where", "which", "who", "will",
        "with", "would", "you", "your",
    ]
)
# fmt: on

# everyday word -> words tools use for it. Multi-word entries ("pull request") match when every
# word of the phrase is in the tool's text.
SYNONYMS: dict[str, tuple[str, ...]] = {
    # storage and memory
    "remember": ("memory", "knowledge", "observation", "store", "save"),
    "memorize": ("memory", "knowledge", "observation", "store"),
    "recall": ("memory", "knowledge", "search", "read"),
    "fact": ("observation", "knowledge", "information"),
    "facts": ("observation", "knowledge", "information"),
    "note": ("observation", "memo", "insight"),
    "person": ("entity", "user", "people"),
    "people": ("entity", "user", "person"),
    "someone": ("entity", "user", "owner"),
    "relationship": ("relation",),
    "link": ("relation", "url"),
    "links": ("relation", "url"),
    "forget": ("delete", "remove"),
    "save": ("write", "store", "create"),
    "store": ("write", "save", "create"),
    "persist": ("write", "save", "store"),
    # files
    "folder": ("directory",),
    "folders": ("directory",),
    "dir": ("directory",),
    "rename": ("move",),
    "open": ("read", "navigate", "create"),
    "load": ("read", "open"),
    "view": ("read", "show", "get"),
    "display": ("show", "read", "get"),
    "contents": ("content", "read"),
    "size": ("size", "metadata", "info"),
    "big": ("size",),
    "modified": ("modified", "time", "metadata"),
    "picture": ("image",),
    "photo": ("image",),
    "img": ("image",),
    "compress": ("gzip", "zip", "compression"),
    "zip": ("gzip", "compress"),
    "several": ("multiple",),
    "many": ("multiple",),
    "whole": ("entire", "all"),
    "dump": ("read", "export", "entire"),
    "glob": ("pattern", "search"),
    # verbs
    "make": ("create",),
    "new": ("create", "new"),
    "add": ("create", "add", "sum"),
    "remove": ("delete",),
    "erase": ("delete",),
    "drop": ("delete", "drop"),
    "change": ("edit", "update", "modify", "change"),
    "modify": ("edit", "update", "change"),
    "alter": ("edit", "update", "change"),
    "replace": ("edit", "update", "replace"),
    "find": ("search", "find", "query"),
    "look": ("search", "find", "get"),
    "lookup": ("search", "find", "get"),
    "show": ("get", "list", "read", "show"),
    "see": ("show", "view", "read"),
    "check": ("status", "get", "check"),
    "download": ("fetch", "get"),
    "grab": ("fetch", "get"),
    "retrieve": ("fetch", "get", "read"),
    "run": ("execute", "run", "evaluate"),
    "execute": ("run", "evaluate"),
    "repeat": ("echo",),
    "undo": ("reset", "revert", "unstage"),
    "revert": ("reset", "undo"),
    "compare": ("diff", "difference"),
    "difference": ("diff",),
    "differences": ("diff",),
    "copy": ("fork", "clone", "copy"),
    "calculate": ("sum", "compute"),
    "total": ("sum",),
    "plus": ("sum",),
    # version control and hosting
    "history": ("log", "commit", "history"),
    "changes": ("diff", "change"),
    "changed": ("diff", "change"),
    "pr": ("pull request",),
    "prs": ("pull request",),
    "repo": ("repository",),
    "repos": ("repository",),
    "ci": ("status", "check"),
    "ticket": ("issue",),
    # Trackers close and reopen issues and pull requests by updating their state.
    "close": ("close", "update", "state"),
    "reopen": ("update", "state", "open"),
    "bug": ("issue",),
    "clean": ("status",),
    # web and browser
    "website": ("web", "url", "page", "internet"),
    "site": ("web", "url", "page"),
    "webpage": ("web", "page", "url"),
    "url": ("web", "address"),
    "article": ("web", "page", "content"),
    "visit": ("navigate", "url"),
    "go": ("navigate",),
    "javascript": ("javascript", "js", "script", "evaluate", "code"),
    "js": ("javascript", "script", "evaluate"),
    "popup": ("dialog",),
    "alert": ("dialog",),
    "modal": ("dialog",),
    "confirm": ("dialog", "accept"),
    "enter": ("key", "press"),
    "keystroke": ("key", "press"),
    "keyboard": ("key", "press"),
    "textbox": ("text", "field", "editable"),
    "input": ("field", "text", "type"),
    "login": ("form",),
    # data
    "db": ("database",),
    "sql": ("query", "database", "sqlite"),
    "select": ("select", "query", "read"),
    "rows": ("insert", "row", "record"),
    "columns": ("schema", "describe"),
    "column": ("schema", "describe"),
    "fields": ("schema", "field"),
    # time
    "date": ("time", "current"),
    "today": ("current", "time"),
    "clock": ("time",),
    "tz": ("timezone",),
    # reasoning
    "think": ("thinking", "thought", "reflective"),
    "reasoning": ("thinking", "thought", "reflective", "problem"),
    "reason": ("thinking", "thought", "problem"),
    "steps": ("step", "thought", "sequential"),
    "plan": ("thinking", "thought", "problem"),
    # environment
    "env": ("environment",),
    "variables": ("variable", "environment"),
    "slow": ("long", "running"),
    "logging": ("logging", "log"),
}
