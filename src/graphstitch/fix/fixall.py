"""`graphstitch fix TARGET --all`: apply verified source patches site by site (rewrites first;
for a site no rewrite fixes, config flags and hatches written as source), on a copy,
re-running the census after each (a fix can reveal the next break), to a fixed point; then
re-verify the combined patch from the pristine files before `--diff` / `--apply` use it.
No torch import."""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ClassVar

from .. import worker
from ..changes import diff, site_label
from ..files import file_hash
from ..model import Census, Site
from ..paths import in_project, short_path
from ..targets import Options, Patches, target_file, target_root
from .candidates import Candidate, candidates
from .copies import census_job, census_on_copy, old_text
from .patches import WRITABLE_KINDS, plan_patch, unified_diff, write_files
from .rewrites import Rewrite, proposals
from .trials import Counts, Fix, evaluate, rank


@dataclass
class Step:
    """One verified rewrite applied by `--all`."""
    label: str            # the site, "GBxxxx path:line" (lines of the text it was applied to)
    candidate: str
    strategy: str
    rule: str | None
    tradeoff: str
    graphs: int           # graphs after this step


@dataclass
class FixAll:
    """`graphstitch fix --all`: start and final counts, the steps, the combined patch."""
    __computed__: ClassVar[tuple[str, ...]] = ("schema",)
    target: str
    start: Counts
    final: Counts
    steps: list[Step] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)   # sites left, with why no rewrite was verified
    verified: bool = False                               # the combined patch, re-checked from pristine files
    why_not: list[str] = field(default_factory=list)
    patch: str = ""                                      # one unified diff of every changed file
    source_sha256: dict[str, str] = field(default_factory=dict)

    @property
    def schema(self) -> str:
        return "graphstitch.fixall/1"


def combined_check(base: Census, final: Census) -> list[str]:
    """Why the combined patch is not verified (empty: it is): it must not add a site or a
    skipped frame, and outputs and printed/logged output must equal the original's."""
    why: list[str] = []
    if final.error:
        why.append(f"error ({final.error.kind.value}): {final.error.headline[:200]}")
        return why
    d = diff(base, final)
    if d.new_sites:
        why.append("new site " + ", ".join(site_label(s.id, s.line) for s in d.new_sites))
    if d.new_skipped:
        why.append("new skipped frame " + ", ".join(f.function for f in d.new_skipped))
    if not (final.outputs_match_eager and final.checks.fresh_outputs_match):
        why.append("outputs differ from the original code's eager outputs: "
                   + str(final.output_mismatch or final.checks.fresh_mismatch or final.checks.fresh_error))
    if final.checks.side_effects_kept is False:
        why.append("printed/logged output differs from the original code's")
    return why


def fix_all(spec: str, opts: Options, *, jobs: int = 2, timeout: float | None = None,
            project_root: str | None = None, max_rounds: int = 12) -> tuple[FixAll, dict[str, str]]:
    """The fixed point, and the combined patch as path -> new text."""
    opts = dataclasses.replace(opts, fresh=True, patches=None)
    root = project_root or target_root(spec)
    tfile = target_file(spec)
    factory = spec.rpartition(":")[2]
    base = worker.run(census_job(spec, opts, root), timeout=timeout).census
    hashes = {os.path.realpath(s.file): file_hash(s.file) for s in base.sites if os.path.isfile(s.file)}
    if tfile:
        hashes[tfile] = file_hash(tfile)
    out = FixAll(spec, Counts.of(base), Counts.of(base), source_sha256=hashes)
    if base.error:
        out.why_not = [f"the target failed: {base.error.headline[:200]}"]
        return out, {}
    overlay: dict[str, str] = {}
    cur = base
    hopeless: dict[str, str] = {}       # site identity text -> why no patch verified
    # A site whose rewrites all failed gets config flags and hatches next, written as source.
    second: dict[str, str] = {}         # site identity text -> why no rewrite verified
    for _ in range(max_rounds):
        pairs: list[tuple[Site, Candidate]] = []
        for s in cur.sites:
            key = str(s.id)
            if key in hopeless:
                continue
            if key in second:
                more = _written_candidates(s, root, tfile, overlay)
                if not more:
                    hopeless[key] = second[key] + "; no config flag or hatch to write"
                pairs += [(s, c) for c in more]
                continue
            props, refused = proposals(s, root, target_file=tfile, factory=factory, overlay=overlay,
                                       sites=cur.sites)
            if not props:
                second[key] = "; ".join(r.reason for r in refused) or "no rewrite rule matches"
                more = _written_candidates(s, root, tfile, overlay)
                if not more:
                    hopeless[key] = second[key]
                pairs += [(s, c) for c in more]
            pairs += [(s, Candidate(p.strategy, p.label, Patches(), p)) for p in props]
        if not pairs:
            break

        def trial(sc: tuple[Site, Candidate], cur: Census = cur) -> tuple[Fix, Census]:
            s, c = sc
            assert c.rewrite is not None
            t = census_on_copy(spec, opts, root, {**overlay, **c.rewrite.files}, timeout, map_lines=False)
            return evaluate(s, c, cur, t), t

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            results = list(ex.map(trial, pairs))
        ranked = rank([f for f, _ in results])
        best = next((f for f in ranked if f.verified), None)
        for s in {p[0].id: p[0] for p in pairs}.values():
            if not any(f.verified for f in ranked if f.site == s.id):
                why = "; ".join(sorted({w for f in ranked if f.site == s.id for w in f.why_not}))[:300]
                if str(s.id) in second:
                    hopeless[str(s.id)] = why
                else:
                    second[str(s.id)] = why
        if best is None:
            break
        i = next(k for k, (f, _) in enumerate(results) if f is best)
        cand = pairs[i][1]
        assert cand.rewrite is not None
        overlay.update(cand.rewrite.files)
        cur = results[i][1]
        out.steps.append(Step(best.label, best.candidate, best.strategy, best.rule, best.tradeoff, cur.graph_count))
    out.remaining = [f"{site_label(s.id, s.line)}: {hopeless.get(str(s.id), 'not tried (round limit)')}"
                     for s in cur.sites]
    out.patch = "".join(unified_diff(p, old_text(p), t) for p, t in overlay.items())
    if overlay:
        final = census_on_copy(spec, opts, root, overlay, timeout)   # from the pristine files
        out.final = Counts.of(final)
        out.why_not = combined_check(base, final)
        out.verified = not out.why_not
    return out, overlay


def _written_candidates(site: Site, root: str, tfile: str | None, overlay: dict[str, str]) -> list[Candidate]:
    """The site's config flags and hatches on project functions, each as a source patch of
    the (already patched) files: `--all` writes every step it takes."""
    out = []
    for c in candidates(site, root):
        if c.kind not in WRITABLE_KINDS or tfile is None or (c.patches.wrap and not in_project(c.patches.wrap.file, root)):
            continue  # a library wrap needs the trial's module:qualname first
        try:
            path, _, new = plan_patch(c.patches, None, tfile, root, overlay)
        except (LookupError, OSError, SyntaxError):
            continue
        out.append(Candidate(c.kind, c.label, Patches(), Rewrite(c.kind, c.strategy, c.label, c.tradeoff,
                                                                  {path: new})))
    return out


def apply_all(result: FixAll, files: dict[str, str], spec: str, opts: Options, *, timeout: float | None = None,
              project_root: str | None = None) -> tuple[str, bool]:
    """Write the combined patch of `--all` (re-verified once more from the files on disk)."""
    if not files:
        return "no verified rewrite to apply", False
    if not result.verified:
        return "the combined patch did not verify: " + "; ".join(result.why_not), False
    root = project_root or target_root(spec)
    opts = dataclasses.replace(opts, fresh=True, patches=None)

    def check() -> list[str]:
        base = worker.run(census_job(spec, opts, root), timeout=timeout).census
        return combined_check(base, census_on_copy(spec, opts, root, files, timeout))
    why, ok = write_files(files, result.source_sha256, root, check)
    if not ok:
        return why or "not applied", False
    return f"applied {len(result.steps)} rewrite(s) to " + ", ".join(short_path(p) for p in files) + f" ({why})", True
