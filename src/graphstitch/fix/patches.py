"""Making a verified fix permanent: the source patch (`fix --diff`), re-verified in the
workspace and written without losing anything the user owns (`fix --apply`). No torch import.

A patch lands where the user's code runs, not in the factory graphstitch imports: a config
line goes into the module that holds the site (or, for a site in a library, the user's
module that calls into it); a decorator onto the user's function; a library function is
wrapped from the user's module that calls it. Files keep their encoding, BOM, line endings,
indentation and final newline (``files.read_source`` / ``encode_source``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping

from ..files import (
    WriteRefused,
    atomic_write,
    check_writable,
    encode_source,
    file_hash,
    parse_python,
    read_source,
    source_text,
)
from ..model import Site
from ..paths import in_project, short_path
from ..targets import Options, Patches, target_file
from .candidates import Candidate
from .rules import proposals
from .trials import THEN, CauseFix, Fix, FixReport, evaluate, joined, on_base
from .workspace import (
    Workspace,
    after_imports,
    binds,
    config_text,
    decorated,
    home_file,
    keep_end,
    unified_diff,
    with_config,
    with_hatch,
)

WRITABLE_KINDS = ("config", "nonstrict_trace", "disable")


def writable(fix: Fix) -> bool:
    """Source rewrites, config lines and decorators that need no generated fake."""
    return fix.rule is not None or fix.kind in WRITABLE_KINDS


def best(report: FixReport) -> Fix | None:
    """The first (best-ranked) verified fix graphstitch can write into the project."""
    return next((f for f in report.fixes if f.verified and writable(f) and not f.upstream), None)


def best_cause(report: FixReport) -> CauseFix | None:
    """The best verified recompile-cause fix (its patch is always source)."""
    return next((f for f in report.cause_fixes if f.verified), None)


def cause_files(fix: CauseFix, report: FixReport, ws: Workspace) -> dict[str, str]:
    """The patch of a cause fix, proposed again on the files as they are now."""
    from .causes import cause_candidates
    cause = next((r for r in report.recompiles if r.id == fix.cause), None)
    if cause is None:
        raise LookupError(f"the census has no recompile cause {fix.label}")
    cands, _ = cause_candidates(cause, report, root=ws.project, target_file=target_file(ws.spec),
                                factory=ws.spec.rpartition(":")[2])
    c = next((c for c in cands if c.label == fix.candidate and c.rewrite is not None), None)
    if c is None or c.rewrite is None:
        raise LookupError(f"the fix {fix.candidate!r} no longer applies")
    return c.rewrite.files


def _apply_cause(fix: CauseFix, report: FixReport, ws: Workspace, opts: Options, *, write: bool,
                 timeout: float | None) -> tuple[str, bool]:
    """--diff / --apply for a recompile-cause fix: the same writer, re-verified with a repeat pass."""
    from .causes import evaluate_cause
    try:
        files = cause_files(fix, report, ws)
    except (LookupError, OSError, SyntaxError) as e:
        return f"cannot write a patch for {fix.candidate}: {e}", False
    diff = patch_text(files)
    if not write:
        return diff, True
    cause = next(r for r in report.recompiles if r.id == fix.cause)

    def check() -> list[str]:
        trial = ws.census(dataclasses.replace(opts, fresh=True, repeat=1), files, timeout)
        return evaluate_cause(cause, Candidate("rewrite", fix.candidate, Patches()), report, trial, None).why_not
    why, ok = write_files(files, report.source_sha256, ws.project, check)
    if not ok:
        return why or "not applied", False
    return f"{diff}\napplied {fix.candidate} to {', '.join(short_path(p) for p in files)} ({why})", True


def best_upstream(report: FixReport) -> Fix | None:
    """The best verified patch to a file outside the project (a library's): to send upstream."""
    return next((f for f in report.fixes if f.verified and f.upstream), None)


def planned_files(fix: Fix, report: FixReport, ws: Workspace, opts: Options | None = None,
                  timeout: float | None = None) -> dict[str, str]:
    """path -> new text of the patch for this fix, computed from the files as they are now
    (a rewrite is proposed again by its rule; a file changed since the census is refused
    later by its hash). A joined rewrite (``a+b``) proposes its first step again and
    censuses it (with OPTS) to find the break it moved, for its second."""
    tfile = target_file(ws.spec)
    if tfile is None:
        raise LookupError(f"cannot find the source file of {ws.spec}")
    # A fix found for another site (``via``) is that site's patch: proposed again there.
    site = next((s for s in report.sites if s.id == (fix.via or fix.site)), None)
    if site is None:
        raise LookupError(f"the census has no site {fix.label}")
    if fix.rule is not None:
        factory = ws.spec.rpartition(":")[2]
        props, _ = proposals(site, ws.project, target_file=tfile, factory=factory, sites=report.sites,
                             gap_code=frozenset(fix.gap_code))
        rule, label = fix.rule, fix.candidate
        if "+" in rule:
            if opts is None:
                raise LookupError(f"the joined rewrite {fix.candidate!r} needs a census to be written again")
            rule, label = rule.split("+")[0], label.split(THEN)[0]
        rw = next((p for p in props if p.rule == rule and p.label == label), None)
        if rw is not None and opts is not None and rule != fix.rule:
            # The first step censused as its trial was: with the base config and hatch, and
            # autograd when the target needs it (the second step's gaps follow its sites).
            rw = on_base(Candidate(rw.strategy, rw.label, Patches(), rw), site, report, tfile, ws.project).rewrite
            assert rw is not None
            trial = ws.census(dataclasses.replace(opts, fresh=True, patches=None,
                                                  grad=opts.grad or bool(report.config.get("grad_auto"))),
                              rw.files, timeout)
            rw = next((j for j in joined(rw, report, trial, ws.project, tfile, factory)
                       if j.rule == fix.rule and j.label == fix.candidate), None)
        if rw is None:
            raise LookupError(f"the rewrite {fix.candidate!r} no longer applies to {short_path(site.file)}")
        return with_hatch(with_config(rw.files, report.config.get("base_config") or {},
                                      home_file(site, tfile, ws.project)), report.config.get("base_hatch"))
    path, _, new = plan_patch(fix.patches, fix.wrapped, site, tfile, ws.project)
    return with_hatch({path: new}, report.config.get("base_hatch"))


def plan_patch(patches: Patches, wrapped: str | None, site: Site, tfile: str, root: str | None,
               texts: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(file to edit, old text, new text) that makes a config/hatch candidate permanent.
    Config lines go after the imports of the site's module (``home_file``); a decorator goes
    on the user's function; a function outside the project (a library; ``wrapped`` is its
    module:qualname, as the trial found it) is wrapped from the user's module that calls it.
    ``texts`` (path -> text) stand for files already patched (`fix --all`)."""
    wrap = patches.wrap
    path = wrap.file if wrap and in_project(wrap.file, root) else home_file(site, tfile, root)
    old = texts[path] if texts and path in texts else source_text(path)
    lines = old.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    tree = parse_python(old)
    top = after_imports(tree)

    def imports(mods: list[str]) -> list[str]:
        return [f"import {m}\n" for m in ["torch", *mods] if not binds(tree, m)]

    if wrap is None:
        return path, old, config_text(patches, old)
    hatch = {"nonstrict_trace": "torch._dynamo.nonstrict_trace", "disable": "torch.compiler.disable"}[wrap.how]
    if path == wrap.file:
        try:
            return path, old, _and_config(patches, decorated(old, wrap.function, wrap.line, hatch))
        except LookupError:
            raise LookupError(f"cannot find {wrap.function}() in {path}") from None
    mod, _, qual = (wrapped or "").partition(":")
    if not mod:
        raise LookupError("the trial did not say which function it wrapped")
    obj = f"{mod}.{qual}"
    add = imports([]) + [f"import {mod}  # graphstitch fix: wrap a library function from your code\n",
                         f"{obj} = {hatch}({obj})  # graphstitch fix\n"]
    return path, old, _and_config(patches, keep_end(old, "".join(lines[:top] + add + lines[top:])))


def _and_config(patches: Patches, text: str) -> str:
    """TEXT with the config lines a hatch's trial ran with too (a fix's base config)."""
    return config_text(Patches(config=patches.config), text) if patches.config else text


def _free_backup_name(path: str) -> str:
    """FILE.graphstitch.bak, or .bak.2, .bak.3...: an earlier backup is never overwritten."""
    backup, n = path + ".graphstitch.bak", 1
    while os.path.lexists(backup):
        n += 1
        backup = f"{path}.graphstitch.bak.{n}"
    return backup


def refuse_reason(path: str, expected_hash: str | None, root: str | None) -> str | None:
    if not in_project(path, root):
        return f"{short_path(path)} is outside the project {root}; not editing it (--project names the project)"
    if expected_hash is None or file_hash(path) != expected_hash:
        return f"{path} changed since the census; run `graphstitch fix` again"
    try:
        check_writable(path)
    except WriteRefused as e:
        return str(e)
    return None


def reverify(fix: Fix, report: FixReport, ws: Workspace, opts: Options, files: dict[str, str],
             timeout: float | None) -> Fix:
    """Census the workspace with the patch applied and evaluate it like a trial."""
    site = next((s for s in report.sites if s.id == fix.site), None)
    if site is None:
        raise LookupError(f"the census has no site {fix.label}")
    trial = ws.census(opts, files, timeout)
    return evaluate(site, Candidate(fix.kind, fix.candidate, fix.patches), report, trial)


def write_files(files: dict[str, str], hashes: dict[str, str], root: str,
                check: Callable[[], list[str]]) -> tuple[str | None, bool]:
    """Write a verified patch (several files): every file refused first if it changed since
    the census (hash), is outside the project or is not writable; ``check`` re-verifies in
    the workspace (reasons, empty when verified); then each file is written atomically, in
    its own encoding and line endings, after its ``.graphstitch.bak`` (never over an earlier
    backup). Returns (refusal, False) or ("backup: NAMES", True)."""
    def refusal() -> str | None:
        for path in files:
            why = refuse_reason(path, hashes.get(os.path.realpath(path)), root)
            if why:
                return why
        return None
    why = refusal()
    if why:
        return why, False
    encoded: dict[str, bytes] = {}
    for path, new in files.items():
        try:
            encoded[path] = encode_source(new, read_source(path)[1])
        except (UnicodeError, SyntaxError, OSError) as e:
            return f"cannot write {short_path(path)} in its own encoding: {e}", False
    try:
        reasons = check()
    except LookupError as e:
        return str(e), False
    if reasons:
        return "the patched copy did not verify: " + "; ".join(reasons), False
    why = refusal()  # a file may have changed meanwhile
    if why:
        return why, False
    done: list[str] = []
    backups: list[str] = []
    for path, data in encoded.items():
        backup = _free_backup_name(path)
        with open(path, "rb") as f:
            old = f.read()
        try:
            atomic_write(backup, old)
            os.chmod(backup, os.stat(path).st_mode & 0o7777)
            atomic_write(path, data)
        except (WriteRefused, OSError) as e:
            with contextlib.suppress(OSError):
                os.unlink(backup)  # ours: the name was free before this write
            return f"not applied to {short_path(path)}: {e}" + (f" (already written: {', '.join(done)})" if done else ""), False
        done.append(short_path(path))
        backups.append(short_path(backup))
    return "backup: " + ", ".join(backups), True


def patch_text(files: dict[str, str], *, upstream: bool = False, root: str | None = None) -> str:
    """The unified diff of FILES against the files on disk, each named by its path inside ROOT
    (the project) where it is in it (an upstream patch: by its path inside the library)."""
    from ..paths import identity_path
    return "".join(unified_diff(p, source_text(p), new, label=identity_path(p, None) if upstream else None,
                                root=root)
                   for p, new in files.items())


def apply_best(report: FixReport, ws: Workspace, opts: Options, *, write: bool,
               timeout: float | None = None) -> tuple[str, bool]:
    """The diff for the best verified candidate (and, with ``write``, apply it). Returns
    (message, ok); never raises for a refusal. With no fix to write into the project, a
    verified upstream patch is shown as such (never written)."""
    fix = best(report)
    cf = best_cause(report) if fix is None else None
    if cf is not None:
        return _apply_cause(cf, report, ws, opts, write=write, timeout=timeout)
    if fix is None:
        up = best_upstream(report)
        if up is not None and up.patch:
            head = (f"# upstream patch for {up.label} ({up.candidate}): verified on a copy of the library; "
                    "graphstitch does not write outside your project — send it to the library\n")
            return head + up.patch, not write
        return "no verified candidate that graphstitch can write as a source patch", False
    try:
        files = planned_files(fix, report, ws, opts, timeout)
    except (LookupError, OSError, SyntaxError) as e:
        return f"cannot write a patch for {fix.candidate}: {e}", False
    diff = patch_text(files, root=ws.project)
    if not write:
        return diff, True
    why, ok = write_files(files, report.source_sha256, ws.project,
                          lambda: reverify(fix, report, ws, opts, files, timeout).why_not)
    if not ok:
        return why or "not applied", False
    # On success write_files says where the backups went.
    return (f"{diff}\napplied {count_kinds([fix.strategy])} ({fix.candidate}) to "
            f"{', '.join(short_path(p) for p in files)} ({why})"), True


# How each strategy's written patch is named, singular and plural.
_KIND_WORDS = {"rewrite": ("rewrite", "rewrites"), "caller": ("caller move", "caller moves"),
               "extract": ("extract", "extracts"), "split": ("region split", "region splits"),
               "config": ("config line", "config lines"), "hatch": ("hatch decorator", "hatch decorators")}


def count_kinds(strategies: list[str]) -> str:
    """What was written, counted by kind: "1 rewrite and 1 config line", "2 rewrites"."""
    order = list(_KIND_WORDS)
    counts: dict[str, int] = {}
    for st in sorted(strategies, key=lambda x: order.index(x) if x in order else len(order)):
        counts[st] = counts.get(st, 0) + 1
    words = [f"{n} {_KIND_WORDS.get(k, (k, k + 's'))[n != 1]}" for k, n in counts.items()]
    return " and ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " and " + words[-1]
