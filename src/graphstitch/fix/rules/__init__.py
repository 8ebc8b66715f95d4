"""Source rewrites for break sites: libcst rules, one family per module, behind the one
``@rule`` interface (``base.py``). Each rule proposes patches to a file (formatting,
comments, indentation kept); nothing here decides whether a patch is right: every proposal
is censused in the fix workspace and judged like any other trial. No torch import.

- ``scalars``: Python numbers and lists made from tensors, kept as tensors;
- ``branches``: data-dependent ``if`` -> ``where`` / ``cond`` / ``_assert_async``; tests that
  only pick storage (a tensor or its copy), that code already skips for tracers, or that
  choose between a mask and None when the mask's own ``any()`` decided, or guard an update
  through the mask they test;
- ``effects``: print, logging and file I/O kept at run time; a function that only reports
  is not traced;
- ``masks``: a reduction of a boolean-mask selection computed on the whole tensors;
- ``apis``: one-line swaps to a traceable twin (a fixed-length ``bincount``);
- ``collectives``: functional collectives, and a ``disable`` the user no longer needs;
- ``caller``: what the caller should do, moved there;
- ``extract``: the statement moved into a helper under an escape hatch;
- ``split``: the region split (the unsupported part between compiled parts).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from ...files import source_text
from ...model import Site
from ...paths import Where, in_project, where
from . import apis, base, branches, caller, collectives, effects, extract, masks, scalars, split  # noqa: F401 - they register
from .base import STRATEGY_RANK, Ctx, Refusal, Rewrite, entry_frame, is_scope_frame, tried_late, user_frames
from .syntax import Index, parses

__all__ = ["STRATEGY_RANK", "Refusal", "Rewrite", "entry_frame", "is_scope_frame", "proposals", "tried_late",
           "user_frames"]


def site_file(site: Site) -> tuple[str | None, str | None]:
    """(file, why not): the file the rules may patch for this site. torch and the standard
    library are never patched; a file outside the project is patched on a copy only, and
    what verifies there is offered as an upstream patch."""
    w = where(site.file)
    if w in (Where.TORCH, Where.STDLIB):
        return None, f"{site.file} is {'torch' if w is Where.TORCH else 'the standard library'}; not patched"
    if not os.path.isfile(site.file):
        return None, f"{site.file} is not on this machine"
    return site.file, None


def proposals(site: Site, root: str | None, *, target_file: str | None = None, factory: str | None = None,
              overlay: dict[str, str] | None = None, sites: Sequence[Site] = (),
              gap_code: frozenset[str] = frozenset()) -> tuple[list[Rewrite], list[Refusal]]:
    """Every rewrite the rules propose for this site, and the rules that refused (why).
    ``root`` is the project (files outside it get upstream patches only); ``overlay``
    (path -> text) stands for files already patched (`fix --all`); ``sites`` are the
    census's other sites (a region split keeps those of the same entry in its gap);
    ``gap_code`` lines a split's trial broke in, which join its gap."""
    path, why = site_file(site)
    if path is None:
        return [], [Refusal("any", why or "no file")]
    overlay = overlay or {}
    try:
        source = overlay[path] if path in overlay else source_text(path)
        idx = Index(MetadataWrapper(cst.parse_module(source)))
    except (cst.ParserSyntaxError, SyntaxError) as e:
        return [], [Refusal("any", f"{path} does not parse: {str(e).splitlines()[0]}")]
    stmt = idx.statement_at(site.line)
    if stmt is None:
        return [], [Refusal("any", f"no statement at {path}:{site.line} (the file changed since the census?)")]
    func = idx.enclosing(stmt, cst.FunctionDef)
    ctx = Ctx(site, path, source, idx, stmt, func if isinstance(func, cst.FunctionDef) else None, root,
              target_file, factory, overlay, sites, gap_code)
    out: list[Rewrite] = []
    refused: list[Refusal] = []
    for name, fn in base.RULES:
        try:
            made = list(fn(ctx))
        except Exception as e:  # noqa: BLE001 - a rule that fails on unusual code is a reason, never a crash
            refused.append(Refusal(name, f"the rule failed on this code ({type(e).__name__}: {str(e)[:120]})"))
            continue
        for r in made:
            if isinstance(r, Refusal):
                refused.append(r)
                continue
            bad = next((p for p, text in r.files.items() if not parses(text)), None)
            if bad:
                refused.append(Refusal(name, f"the rewrite of {os.path.basename(bad)} does not parse; not offered"))
            elif all(text == ctx.read(p) for p, text in r.files.items()):
                continue
            else:
                r.upstream = any(not in_project(p, root) for p in r.files)
                if gap_code and tried_late(r):
                    r.gap_code = tuple(sorted(gap_code))
                out.append(r)
    out += [c for r in out if r.rule in _THEN_KEEP_TENSOR and (c := _then_keep_tensor(r, ctx)) is not None]
    return out, refused


# Rules whose output is a tensor where the code had host values (numpy's, scipy's, a count
# read back as a number): a float()/int()/.item() around it is then a break of its own on
# the same line, so each is also offered composed with item-keep-tensor.
_THEN_KEEP_TENSOR = ("numpy-torch", "scipy-special-torch", "count-selected")


def _then_keep_tensor(first: Rewrite, ctx: Ctx) -> Rewrite | None:
    text = first.files.get(ctx.path)
    if text is None or len(first.files) != 1:
        return None
    line = _mapped_line(ctx.source, text, ctx.idx.pos[ctx.stmt])
    try:
        idx = Index(MetadataWrapper(cst.parse_module(text)))
    except cst.ParserSyntaxError:
        return None
    stmt = idx.statement_at(line)
    if stmt is None:
        return None
    func = idx.enclosing(stmt, cst.FunctionDef)
    ctx2 = dataclasses.replace(ctx, source=text, idx=idx, stmt=stmt,
                               func=func if isinstance(func, cst.FunctionDef) else None)
    try:
        then = next((r for r in scalars.item_keep_tensor(ctx2) if isinstance(r, Rewrite)), None)
    except Exception:  # noqa: BLE001 - the composition is optional
        return None
    if then is None or not parses(then.files[ctx.path]):
        return None
    return dataclasses.replace(then, rule=f"{first.rule}+{then.rule}", label=f"{first.label}, then {then.label}",
                               tradeoff=f"{first.tradeoff}; {then.tradeoff}", upstream=first.upstream)


def _mapped_line(old: str, new: str, line: int) -> int:
    """LINE of OLD in NEW (within what replaced it, when the patch changed it)."""
    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for _, i1, i2, j1, j2 in sm.get_opcodes():
        if i1 < line <= i2:
            return j1 + max(1, min(line - i1, j2 - j1))
    return line
