"""`graphstitch fix TARGET --all`: apply verified source patches site by site, in the
workspace, re-running the census after each (a fix can reveal the next break), to a fixed
point; then re-verify the combined patch from the pristine files before `--diff` /
`--apply` use it. No torch import.

Per site: rewrites, caller moves and extracts first; a site none of them fixes gets its
region splits, config flags and hatches next, all written as source lines. A site *uncovered*
by a fix (code Dynamo never traced before, past a break that made it skip a frame) is
progress, not a moved break: it is reported as uncovered and fixed in turn.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ClassVar

from .. import worker
from ..changes import diff, site_label
from ..files import file_hash, source_text
from ..model import Census, ErrorKind, RecompileCause, Site
from ..paths import in_project, short_path
from ..targets import Options, Patches, target_file
from .candidates import DATA_FLAGS, Candidate, both_data_flags, candidates
from .patches import WRITABLE_KINDS, count_kinds, patch_text, plan_patch, write_files
from .rules import Rewrite, proposals, tried_late
from .trials import (
    CLOCK_REPEATS,
    GROW_ROUNDS,
    NUMPY_OFF,
    NUMPY_STREAM,
    CauseFix,
    Counts,
    Fix,
    Unreproduced,
    chained,
    draws_numpy_random,
    evaluate,
    fails_in_numpy,
    hatch_label,
    may_grow,
    mend_crash,
    moved_code,
    new_breaks,
    proved,
    ran_to_end,
    rank,
    reads_a_clock,
    refuse_unreproduced,
    uncovered,
    unreproduced,
    untraced_code,
)
from .workspace import Workspace, home_file, with_config, with_hatch


@dataclass
class Step:
    """One verified patch applied by `--all`."""
    label: str            # the site, "GBxxxx path:line" (lines of the text it was applied to)
    candidate: str
    strategy: str
    rule: str | None
    tradeoff: str
    graphs: int           # graphs after this step
    uncovered: list[str] = field(default_factory=list)   # sites this step revealed (never traced before)


@dataclass
class FixAll:
    """`graphstitch fix --all`: start and final counts, the steps, the combined patch."""
    __computed__: ClassVar[tuple[str, ...]] = ("schema",)
    target: str
    start: Counts
    final: Counts
    steps: list[Step] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)   # sites left, with why no patch was verified
    verified: bool = False                               # the combined patch, re-checked from pristine files
    why_not: list[str] = field(default_factory=list)
    patch: str = ""                                      # one unified diff of every changed file
    source_sha256: dict[str, str] = field(default_factory=dict)
    uncovered: list[str] = field(default_factory=list)   # sites found in code the first census never traced
    given_inputs_only: str | None = None                 # why outputs were proved on the factory's calls only
    remaining_causes: list[str] = field(default_factory=list)   # avoidable recompile causes left, with why
    explained: list[str] = field(default_factory=list)          # causes that must recompile (expected), with their count

    @property
    def schema(self) -> str:
        return "graphstitch.fixall/1"


def combined_check(base: Census, final: Census) -> list[str]:
    """Why the combined patch is not verified (empty: it is): it must not add a site (but one
    in code the base never traced) or a skipped frame, and outputs and printed/logged output
    must equal the original's."""
    why: list[str] = []
    if final.error:
        why.append(f"error ({final.error.kind.value}): {final.error.headline[:200]}")
        return why
    d = diff(base, final)
    hidden = untraced_code(base)
    moved = [s for s in new_breaks(base, final) if not uncovered(base, s, hidden)]
    if moved:
        why.append("new site " + ", ".join(site_label(s.id, s.line) for s in moved))
    if d.new_skipped:
        why.append("new skipped frame " + ", ".join(f.function for f in d.new_skipped))
    if d.new_causes:
        why.append("new recompile cause " + ", ".join(r.reason for r in d.new_causes))
    if d.new_limit_hits:
        why.append("recompile limit hit " + ", ".join(h.function for h in d.new_limit_hits))
    unstable = [r.reason for r in final.recompiles if r.repeats]
    if unstable:
        why.append("recompiles on a repeat pass over the same calls: " + ", ".join(unstable))
    outputs, effects, _ = proved(final, base)
    if not outputs:
        why.append("outputs differ from the original code's eager outputs: "
                   + str(final.output_mismatch or final.checks.fresh_mismatch or final.checks.fresh_error))
    if effects is False:
        why.append("printed/logged output differs from the original code's")
    return why


def fix_all(spec: str, opts: Options, *, jobs: int = 2, timeout: float | None = None,
            project_root: str | None = None, max_rounds: int = 12,
            progress: Callable[[str], None] | None = None) -> tuple[FixAll, dict[str, str]]:
    """The fixed point, and the combined patch as path -> new text. PROGRESS: the phase."""
    say = progress or (lambda _t: None)
    opts = dataclasses.replace(opts, fresh=True, patches=None)
    ws = Workspace.of(spec, project_root)
    tfile = target_file(spec)
    factory = spec.rpartition(":")[2]
    base = worker.run(ws.job(opts), timeout=timeout, progress=lambda t: say(f"baseline census: {t}")).census
    if base.config.get("grad_auto"):   # a training step: every round runs with autograd from the start
        opts = dataclasses.replace(opts, grad=True)
    hashes = {os.path.realpath(f): file_hash(f) for s in base.sites for f in {s.file, *(fr.file for fr in s.stack)}
              if os.path.isfile(f)}
    if tfile:
        hashes[tfile] = file_hash(tfile)
    out = FixAll(spec, Counts.of(base), Counts.of(base), source_sha256=hashes)
    if base.error and base.error.kind is not ErrorKind.COMPILED:   # failing only compiled: fixes may mend it
        out.why_not = [f"the target failed: {base.error.headline[:200]}"]
        return out, {}
    overlay: dict[str, str] = {}

    def base_step(files: dict[str, str], keep: Callable[[Census], bool], candidate: str, kind: str,
                  why: str) -> Census | None:
        """The baseline again with FILES patched: when KEEP holds, every step starts from it
        (a step of its own, written with the rest)."""
        kept = ws.census(opts, files, timeout, map_lines=False)
        if not keep(kept):
            return None
        overlay.update(files)
        out.steps.append(Step("(all)", candidate, kind, None, why, kept.graph_count, []))
        return kept

    def completes(c: Census) -> bool:   # (its outputs may differ: each trial is judged against eager)
        return c.error is None and c.graph_count > 0

    if base.error is None and base.outputs_match_eager is False and base.sites and tfile \
            and draws_numpy_random(base, ws.project):
        # Every step keeps NumPy's random stream (trials.NUMPY_STREAM) when that restores eager outputs.
        base = base_step(with_config({}, NUMPY_STREAM, home_file(base.sites[0], tfile, ws.project)),
                         lambda c: c.error is None and c.outputs_match_eager is True,
                         "config use_numpy_random_stream=True", "config",
                         "NumPy's random calls in compiled code run on NumPy's stream (each one a break), "
                         "as they do eagerly") or base
    # What the compiled run failed on is mended in every step (trials.crash_hatch).
    if (mended := mend_crash(base, ws.project, lambda h: ws.census(opts, with_hatch({}, h), timeout, map_lines=False),
                             say)):
        base, hatch = mended
        overlay.update(with_hatch({}, hatch))
        out.steps.append(Step("(all)", hatch_label(hatch), "rewrite" if hatch.get("rewrites") else "hatch", None,
                              hatch["why"], base.graph_count, []))
        out.source_sha256.setdefault(hatch["file"], file_hash(hatch["file"]))
    if fails_in_numpy(base) and base.sites and tfile:
        # NumPy calls are left to Python in every step (trials.NUMPY_OFF) when that lets the run complete.
        say("baseline census, NumPy calls left to Python: the compiled run failed in code that calls NumPy")
        base = base_step(with_config(dict(overlay), NUMPY_OFF, home_file(base.sites[0], tfile, ws.project)),
                         completes, "config trace_numpy=False", "config",
                         "the compiled run failed in code that calls NumPy: NumPy calls run in Python "
                         "(each one a break), as they do eagerly") or base
    cur = base
    shaky: list[Unreproduced] = []   # sites the unchanged code does not always have (trials.CLOCK_REPEATS)
    if base.sites and reads_a_clock(base, ws.project):
        say("baseline census, again: the code reads a clock")
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            again = list(ex.map(lambda _i: ws.census(opts, dict(overlay), timeout, map_lines=False),
                                range(CLOCK_REPEATS)))
        shaky = unreproduced(base, again)
        if lost := sum(not ran_to_end(c) for c in again):
            say(f"reproducibility not checked by {lost} of {len(again)} repeat baseline censuses: they failed")
    grow: dict[str, frozenset[str]] = {}   # site identity text -> the lines its splits' trials broke in (GROW_ROUNDS)
    grown_rounds: Counter[str] = Counter()
    done: dict[str, str] = {}        # site identity text -> why nothing verified (rewrites, then flags and hatches)
    flags_next: dict[str, str] = {}  # site identity text -> why no rewrite verified: its flags and hatches come next
    joins: dict[str, list[Candidate]] = {}   # site identity text -> its rewrite joined to one for the break it moved
    rounds = 0

    def read_patched(path: str) -> str:   # the text the current census's lines refer to
        return overlay[path] if path in overlay else source_text(path)

    for rounds in range(1, max_rounds + 1):
        pairs: list[tuple[Site, Candidate]] = []
        second: set[str] = set()     # sites whose candidates this round are flags and hatches
        for s in cur.sites:
            key = str(s.id)
            if key in done:
                continue
            if key in joins:   # (trials.chained) tried before its flags and hatches
                pairs += [(s, c) for c in joins.pop(key)]
                continue
            if key not in flags_next:
                props, refused = proposals(s, ws.project, target_file=tfile, factory=factory, overlay=overlay,
                                           sites=cur.sites)
                props = [p for p in props if not p.upstream and not tried_late(p)]   # the project only
                if props:
                    pairs += [(s, Candidate(p.strategy, p.label, Patches(), p)) for p in props]
                    continue
                flags_next[key] = "; ".join(dict.fromkeys(r.reason for r in refused)) or "no rewrite rule matches"
            # Second: region splits, config flags and hatches, all written as source.
            props, _ = proposals(s, ws.project, target_file=tfile, factory=factory, overlay=overlay, sites=cur.sites,
                                 gap_code=grow.get(key, frozenset()))
            more = [Candidate(p.strategy, p.label, Patches(), p) for p in props
                    if tried_late(p) and not p.upstream] + \
                (_written_candidates(s, ws, tfile, overlay) if key not in grow else [])
            if not more:
                done[key] = flags_next[key] + "; no region split, config flag or hatch to write"
            second.add(key)
            pairs += [(s, c) for c in more]
        if not pairs:
            break

        say(f"round {rounds}: trial 0 of {len(pairs)} done")
        counter = itertools.count(1)

        def trial(sc: tuple[Site, Candidate], cur: Census = cur, n: int = len(pairs), r: int = rounds,
                  finished: Iterator[int] = counter) -> tuple[Fix, Census]:
            s, c = sc
            assert c.rewrite is not None
            t = ws.census(opts, {**overlay, **c.rewrite.files}, timeout, map_lines=False)
            say(f"round {r}: trial {next(finished)} of {n} done")   # next() on a count is atomic
            return evaluate(s, c, cur, t, read=read_patched), t

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            results = list(ex.map(trial, pairs))
        refuse_unreproduced([f for f, _ in results], shaky)
        ranked = rank([f for f, _ in results])
        best = next((f for f in ranked if f.verified), None)
        # A rewrite that moved its break into code it feeds goes on, joined (as `fix` does), next round.
        firsts = [k for k, (_, c) in enumerate(pairs) if c.rewrite is not None and "+" not in c.rewrite.rule]
        for s, c in chained([pairs[k] for k in firsts], [results[k][0] for k in firsts],
                            {pairs[k][1].key: results[k][1] for k in firsts}, cur, ws.project, tfile, factory,
                            overlay=overlay):
            if str(s.id) not in second and not any(f.verified for f in ranked if f.site == s.id):
                joins.setdefault(str(s.id), []).append(c)
        for s in {p[0].id: p[0] for p in pairs}.values():
            key = str(s.id)
            if any(f.verified for f in ranked if f.site == s.id):
                continue
            why = "; ".join(sorted({w for f in ranked if f.site == s.id for w in f.why_not}))[:300]
            # A split that broke anew in one of its compiled parts is tried again, grown (trials.grown).
            more_code = frozenset().union(*(moved_code(c.rewrite, cur, t, read_patched) for (f, t), (_, c)
                                            in zip(results, pairs) if f.site == s.id and c.rewrite is not None
                                            and tried_late(c.rewrite) and may_grow(f)))
            if key in second and more_code - grow.get(key, frozenset()) and grown_rounds[key] < GROW_ROUNDS:
                grown_rounds[key] += 1
                grow[key] = grow.get(key, frozenset()) | more_code
            elif key in second:
                done[key] = f"{flags_next[key]}; {why}"
            else:   # (a join, if any, is tried first)
                flags_next[key] = f"{flags_next[key]}; {why}" if key in flags_next else why
        if best is None:
            continue   # sites whose rewrites failed this round get their flags and hatches next
        joins.clear()   # proposed on the texts before this step: their files would undo it
        i = next(k for k, (f, _) in enumerate(results) if f is best)
        cand = pairs[i][1]
        assert cand.rewrite is not None
        for path in cand.rewrite.files:   # a file first patched now (an uncovered site's): as it is on disk
            if path not in overlay and os.path.realpath(path) not in out.source_sha256:
                out.source_sha256[os.path.realpath(path)] = file_hash(path)
        overlay.update(cand.rewrite.files)
        cur = results[i][1]
        out.steps.append(Step(best.label, best.candidate, best.strategy, best.rule, best.tradeoff, cur.graph_count,
                              best.uncovered))
        out.uncovered += best.uncovered
    cur = _cause_rounds(out, cur, ws, opts, tfile, factory, overlay, timeout, jobs, max_rounds)
    limit = rounds >= max_rounds
    out.remaining = [f"{site_label(s.id, s.line)}: "
                     + done.get(str(s.id), "not tried: the round limit was reached" if limit else "not tried")
                     for s in cur.sites]
    out.patch = patch_text(overlay, root=ws.project)
    if overlay:
        say("combined patch: census from the pristine files")
        # From the pristine files, with a repeat pass: recompile fixes must keep the code compiled.
        final = ws.census(dataclasses.replace(opts, repeat=1), overlay, timeout)
        out.final = Counts.of(final)
        out.why_not = combined_check(base, final)
        out.given_inputs_only = proved(final, base)[2]
        out.verified = not out.why_not
    return out, overlay


def _cause_rounds(out: FixAll, cur: Census, ws: Workspace, opts: Options, tfile: str | None, factory: str,
                  overlay: dict[str, str], timeout: float | None, jobs: int, max_rounds: int) -> Census:
    """After the break sites, the recompile causes: each round tries every candidate of every
    avoidable cause left (with a repeat pass), applies the best verified one, and goes on from
    its census. Expected causes are explained with their count."""
    from .causes import avoidable, cause_candidates, evaluate_cause, explain, label, rank_causes
    ropts = dataclasses.replace(opts, repeat=1)
    done: dict[object, str] = {}
    for _ in range(max_rounds):
        pairs: list[tuple[RecompileCause, Candidate]] = []
        for r in avoidable(cur):
            if r.id in done:
                continue
            cands, why = cause_candidates(r, cur, root=ws.project, target_file=tfile, factory=factory,
                                          sites=cur.sites, read=overlay)
            if not cands:
                done[r.id] = why or "no candidate applies"
            pairs += [(r, c) for c in cands]
        if not pairs:
            break

        def trial(rc: tuple[RecompileCause, Candidate], cur: Census = cur) -> tuple[CauseFix, Census]:
            r, c = rc
            assert c.rewrite is not None
            t = ws.census(ropts, {**overlay, **c.rewrite.files}, timeout, map_lines=False)
            return evaluate_cause(r, c, cur, t, None), t

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            results = list(ex.map(trial, pairs))
        ranked = rank_causes([f for f, _ in results])
        for r in {p[0].id: p[0] for p in pairs}.values():
            if not any(f.verified for f in ranked if f.cause == r.id):
                done[r.id] = "; ".join(sorted({w for f in ranked if f.cause == r.id for w in f.why_not}))[:300]
        best = next((f for f in ranked if f.verified), None)
        if best is None:
            break
        i = next(k for k, (f, _) in enumerate(results) if f is best)
        cand = pairs[i][1]
        assert cand.rewrite is not None
        for path in cand.rewrite.files:
            if path not in overlay and os.path.realpath(path) not in out.source_sha256:
                out.source_sha256[os.path.realpath(path)] = file_hash(path)
        overlay.update(cand.rewrite.files)
        cur = results[i][1]
        done[best.cause] = "fixed"
        out.steps.append(Step(f"recompile: {best.label}", best.candidate, best.strategy, best.rule, best.tradeoff,
                              cur.graph_count))
    out.remaining_causes = [f"{label(r)}: {done.get(r.id, 'not tried')}" for r in avoidable(cur)]
    out.explained = [f"{label(r)}: {e.reason}" for r in cur.recompiles if (e := explain(r)) is not None]
    return cur


def _written_candidates(site: Site, ws: Workspace, tfile: str | None, overlay: dict[str, str]) -> list[Candidate]:
    """The site's config flags and hatches on project functions, each as a source patch of
    the (already patched) files: `--all` writes every step it takes."""
    out = []
    cands = candidates(site, ws.project)
    if any(set(c.patches.config) & set(DATA_FLAGS) for c in cands):
        cands.append(both_data_flags())   # no later round to learn that one flag only moves the break
    for c in cands:
        if c.kind not in WRITABLE_KINDS or tfile is None or (c.patches.wrap and not in_project(c.patches.wrap.file, ws.project)):
            continue  # a library wrap needs the trial's module:qualname first
        try:
            path, _, new = plan_patch(c.patches, None, site, tfile, ws.project, overlay)
        except (LookupError, OSError, SyntaxError):
            continue
        out.append(Candidate(c.kind, c.label, Patches(), Rewrite(c.kind, c.strategy, c.label, c.tradeoff,
                                                                  {path: new})))
    return out


def apply_all(result: FixAll, files: dict[str, str], ws: Workspace, opts: Options, *,
              timeout: float | None = None) -> tuple[str, bool]:
    """Write the combined patch of `--all` (re-verified once more from the files on disk)."""
    if not files:
        return "no verified patch to apply", False
    if not result.verified:
        return "the combined patch did not verify: " + "; ".join(result.why_not), False
    opts = dataclasses.replace(opts, fresh=True, patches=None)

    def check() -> list[str]:
        base = worker.run(ws.job(opts), timeout=timeout).census
        return combined_check(base, ws.census(opts, files, timeout))
    why, ok = write_files(files, result.source_sha256, ws.project, check)
    if not ok:
        return why or "not applied", False
    return (f"applied {count_kinds([s.strategy for s in result.steps])}, verified together, to "
            + ", ".join(short_path(p) for p in files) + f" ({why})"), True

