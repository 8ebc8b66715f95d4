"""The one interface of the rewrite rules: a rule is a function of a :class:`Ctx` (the site,
its statement and function, the file's syntax) that yields :class:`Rewrite` proposals or
:class:`Refusal` reasons, registered with ``@rule(name)``. A rule matches what Dynamo
reported (the GB id, the break's text) and the *structure* of the code; it never decides
that its patch is right: every proposal is censused in the fix workspace and judged like
any other trial. No torch import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from ...files import source_text
from ...model import Site, StackEntry
from ...paths import is_torch_file_path
from .syntax import Index, swap_code

# Strategies, best first: the break is gone from the code; the caller does the unsupported
# part and passes its result in; the break's statements moved into a helper under an escape
# hatch; the unsupported part runs between compiled parts.
STRATEGY_RANK = {"rewrite": 0, "caller": 1, "extract": 2, "hatch": 2, "split": 3, "config": 4}


@dataclass
class Rewrite:
    """One proposed source patch for one site."""
    rule: str                 # the rule's id, e.g. "item-keep-tensor"
    strategy: str             # "rewrite" | "caller" | "extract" | "split"
    label: str                # what it does, for people
    tradeoff: str             # one line: what it costs
    files: dict[str, str] = field(default_factory=dict)   # path -> new text (kept out of JSON)
    ranks: int = 0            # also verified on this many gloo ranks (a collective rewrite)
    upstream: bool = False    # it patches a file outside the project: offered, never written
    gap_code: tuple[str, ...] = ()   # a split proposed again with these lines in its gap (``Ctx.gap_code``)


def tried_late(rw: Rewrite) -> bool:
    """A patch that reshapes the code most: a region split, or an entry split (which changes
    what the caller compiles). Tried only for the sites no smaller patch fixed."""
    return rw.strategy == "split" or rw.rule == "entry-split"


@dataclass
class Refusal:
    """A rule that matched the site but will not propose a patch, and why."""
    rule: str
    reason: str


@dataclass
class Ctx:
    """A site as the rules see it. ``stmt`` is the innermost statement holding the site's
    line (a comprehension's site maps to the statement holding the comprehension); ``func``
    the ``def`` around it."""
    site: Site
    path: str
    source: str
    idx: Index
    stmt: cst.BaseStatement
    func: cst.FunctionDef | None
    root: str | None = None                     # the project
    target_file: str | None = None
    factory: str | None = None
    overlay: dict[str, str] = field(default_factory=dict)   # path -> text of files already patched (`--all`)
    sites: Sequence[Site] = ()                  # the census's sites (a region split keeps those of its entry)
    # Lines (as text) that a split's trial showed to break in a compiled part: the statements
    # of the split function holding one join its gap (``trials.moved_code``).
    gap_code: frozenset[str] = frozenset()

    @property
    def module(self) -> cst.Module:
        return self.idx.module

    @property
    def pos(self) -> dict[cst.CSTNode, int]:
        return self.idx.pos

    @property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        return self.idx.parents

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def swap(self, swaps: dict[cst.CSTNode, object]) -> str:
        return swap_code(self.module, swaps)

    def read(self, path: str) -> str:
        """Another file's text, as patched so far."""
        return self.overlay[path] if path in self.overlay else source_text(path)

    def later_in_func(self) -> list[cst.BaseStatement]:
        """Statements of the enclosing function after the site's (any depth)."""
        if self.func is None:
            return []
        line = self.idx.end[self.stmt]
        return [n for n in _walk_stmts(self.func.body) if self.pos.get(n, 0) > line]


def _walk_stmts(node: cst.CSTNode) -> Iterator[cst.BaseStatement]:
    for c in node.children:
        if isinstance(c, cst.BaseStatement):
            yield c
        yield from _walk_stmts(c)


Rule = Callable[[Ctx], Iterator["Rewrite | Refusal"]]
RULES: list[tuple[str, Rule]] = []


def rule(name: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        RULES.append((name, fn))
        return fn
    return deco


def user_frames(site: Site) -> list[StackEntry]:
    """The site's stack without torch's own frames, outermost first: the compiled entry is
    ``[len - nesting_depth]``, the site's own frame the last."""
    return [fr for fr in site.stack if not is_torch_file_path(fr.file)
            and fr.function not in ("_call_impl", "_wrapped_call_impl")]


def entry_frame(site: Site) -> StackEntry | None:
    """The frame of the compiled entry (the function torch.compile was given) in the site's stack."""
    frames = user_frames(site)
    i = len(frames) - site.nesting_depth
    return frames[i] if 0 <= i < len(frames) else None


def is_scope_frame(function: str) -> bool:
    """A comprehension's, generator expression's or lambda's own frame (``<listcomp>``,
    ``<genexpr>``, ``<lambda>``): not a function anyone can decorate or call by name."""
    return function.startswith("<") and function.endswith(">")
