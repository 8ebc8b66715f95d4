"""Guard stability: does a target keep its compiled code when called again, or with one
dimension changed?

Runs the target's calls under a capture, then reads the Census: recompile causes come from
``census.recompiles`` (not regrouped here), the guard set of every cache entry from
``census.guards`` (the ``dynamo_cpp_guards_str`` trace record), normalized so that object
ids, addresses and the global-state blob do not make two equal guard sets look different.
The result is a :class:`GuardReport`. Module import stays torch-free.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from .advice import advise
from .model import Census, ErrorInfo, LimitHit, RecompileCause
from .records import compile_order, frame_key, recompile_index
from .targets import Call, Options

DEFAULT_SIZES_AFTER = 3   # --vary: the original size, then this many others
_LIMIT_RE = re.compile(r"recompile limit exceeded", re.I)


# ----------------------------------------------------------------------------- guard text

def normalize_guards(text: str) -> list[str]:
    """Guard lines with what differs between processes or entries for no reason removed:
    source comments, ``id()`` values, addresses, the GLOBAL_STATE config blob, latency."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("Guard latency") or line.strip() == "TREE_GUARD_MANAGER:":
            continue
        line = re.sub(r"\s+#\s.*$", "", line)                                   # "  # code  # file:line in fn"
        line = re.sub(r"(___check_(?:obj|type)_id\(.*?,\s*)\d+\)", r"\1<id>)", line)
        line = re.sub(r"0x[0-9a-fA-F]+", "<addr>", line)
        line = re.sub(r"(___check_global_state\(\) against ).*$", r"\1<global state>", line)
        line = re.sub(r"framelocals_idx=\d+", "framelocals_idx=<n>", line)
        line = re.sub(r"\b(__\w+?___)\d+\b", r"\1<n>", line)                    # __builtins_dict___2
        out.append(re.sub(r"[ \t]+", " ", line).rstrip())
    return out


def guard_diff(before: list[str], after: list[str]) -> list[str]:
    """Only the changed guard lines, '-' for the older entry and '+' for the newer one."""
    return [d for d in difflib.unified_diff(before, after, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("---", "+++"))]


@dataclass
class FrameEntries:
    frame: str                       # frame id (with compiled-autograd prefix if any)
    function: str
    compile_ids: list[str]           # cache entries that produced guards, oldest first
    guards: dict[str, list[str]]     # compile id -> normalized guard lines
    diffs: dict[str, list[str]]      # compile id -> diff against the previous entry


def cache_entries(c: Census) -> list[FrameEntries]:
    """The guard set of each cache entry, grouped by frame, with the diff between entries."""
    functions = {f.compile_id: f.function for f in c.frames}
    frames: dict[str, FrameEntries] = {}
    for cid in sorted(c.guards, key=compile_order):
        frame = frame_key(cid)
        fe = frames.setdefault(frame, FrameEntries(frame, functions.get(cid, "?"), [], {}, {}))
        lines = normalize_guards(c.guards[cid])
        if fe.compile_ids:
            fe.diffs[cid] = guard_diff(fe.guards[fe.compile_ids[-1]], lines)
        fe.compile_ids.append(cid)
        fe.guards[cid] = lines
    return list(frames.values())


# ----------------------------------------------------------------------------- runs

def parse_vary(spec: str) -> tuple[str | None, int]:
    """``0`` (first tensor argument) or ``NAME:0``."""
    name, _, dim = spec.rpartition(":")
    if not dim.lstrip("-").isdigit() or (name and not name.isidentifier()):
        raise ValueError(f"--vary {spec!r}: expected DIM or NAME:DIM, e.g. 0 or x:0")
    return (name or None), int(dim)


def _arg_names(fn: Any, n_args: int) -> list[str]:
    import inspect
    try:
        sig = inspect.signature(fn.forward if hasattr(fn, "forward") else fn)
        names = [p.name for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n_args)])[:n_args]


def vary_calls(call: Call, name: str | None, dim: int, sizes: list[int] | None) -> tuple[list[Call], str, list[int]]:
    """Calls of the first factory call with one tensor's dimension changed over several
    sizes. Returns (calls, the argument's name, sizes)."""
    import torch
    fn, args, kwargs = call
    names = _arg_names(fn, len(args))
    slots: list[tuple[str, tuple[str, Any]]] = ([(n, ("arg", i)) for i, n in enumerate(names)]
                                                + [(k, ("kw", k)) for k in kwargs])
    value = lambda slot: args[slot[1]] if slot[0] == "arg" else kwargs[slot[1]]
    tensors = [(n, s) for n, s in slots if isinstance(value(s), torch.Tensor)]
    if not tensors:
        raise ValueError("--vary: the target's first call has no tensor argument")
    if name is None:
        name, slot = tensors[0]
    else:
        found = [s for n, s in tensors if n == name]
        if not found:
            raise ValueError(f"--vary: no tensor argument named {name!r} (tensor arguments: "
                             f"{', '.join(n for n, _ in tensors)})")
        slot = found[0]
    t = value(slot)
    if not -t.dim() <= dim < t.dim():
        raise ValueError(f"--vary: {name} has {t.dim()} dimensions, no dimension {dim}")
    base = t.shape[dim]
    # Sizes 0 and 1 are specialized by Dynamo: vary over sizes >= 2.
    sizes = sizes or [base] + [max(base, 2) + k for k in range(1, DEFAULT_SIZES_AFTER + 1)]
    out = []
    for size in sizes:
        shape = list(t.shape)
        shape[dim] = size
        g = torch.Generator().manual_seed(size)
        new = (torch.randn(shape, generator=g, dtype=t.dtype) if t.is_floating_point()
               else torch.zeros(shape, dtype=t.dtype)).to(t.device).requires_grad_(t.requires_grad)
        a, kw = list(args), dict(kwargs)
        if slot[0] == "arg":
            a[slot[1]] = new
        else:
            kw[slot[1]] = new
        out.append((fn, tuple(a), kw))
    return out, name, sizes


def shared_code(calls: list[Call]) -> list[str]:
    """Functions reached through several distinct objects built from one code object (a
    factory of closures or modules): they share one Dynamo cache, so each one's guards
    evict or recompile the others'."""
    seen: dict[Any, set[int]] = {}
    for fn, _, _ in calls:
        code = getattr(getattr(fn, "forward", fn), "__code__", None)
        if code is not None:
            seen.setdefault(code, set()).add(id(fn))
    return sorted({code.co_name for code, ids in seen.items() if len(ids) > 1})


SHARED_CODE_ADVICE = ("{names} is called through {what} built from one code object, which share one compile "
                      "cache: compile each with torch.compile(fn, isolate_recompiles=True), or make it once and "
                      "pass what differs as arguments.")


@dataclass
class GuardRun:
    """What was run: the factory's calls repeated, or one dimension varied."""
    mode: str                          # "repeat" | "vary"
    recompile_limit: int | None
    shared_code: list[str] = field(default_factory=list)
    repeat: int | None = None
    vary: str | None = None            # NAME:DIM
    sizes: list[int] = field(default_factory=list)


def run(spec: str, opts: Options, *, repeat: int | None = None, vary: str | None = None,
        sizes: list[int] | None = None, recompile_limit: int | None = None,
        project_root: str | None = None) -> tuple[Census, GuardRun]:
    """Census of the target's calls repeated or varied, in this process. Raises TargetError
    (bad target) or ValueError (bad --vary)."""
    from . import dynamo
    from .live import Capture, load_calls, run_calls
    calls = load_calls(spec)
    if isinstance(calls, ErrorInfo):  # the factory exited: an incomplete census, nothing to judge
        with Capture(target=spec, project_root=project_root) as cap:
            cap.complete(False)
            cap.fail(calls)
        assert cap.census is not None
        return cap.census, GuardRun("repeat" if repeat else "vary", None, [])
    info = GuardRun("repeat" if repeat else "vary",
                    recompile_limit if recompile_limit is not None else dynamo.recompile_limit(),
                    shared_code(calls))
    if repeat:
        # The factory's calls once (the first pass: they may differ on purpose), then the
        # same calls again: only a recompile in a repeat pass is instability.
        opts = dataclasses.replace(opts, repeat=repeat - 1)
        info.repeat = repeat
    else:
        name, dim = parse_vary(vary or "")
        calls, name, used = vary_calls(calls[0], name, dim, sizes)
        info.vary, info.sizes = f"{name}:{dim}", used
    patch: dict[str, Any] = {} if recompile_limit is None else {"recompile_limit": recompile_limit}
    with dynamo.config(**patch), Capture(target=spec, project_root=project_root) as cap:
        run_calls(cap, calls, opts)
    assert cap.census is not None
    return advise(cap.census), info


@dataclass
class Stability:
    ok: bool
    limit_hits: list[str] = field(default_factory=list)     # functions that fell back to eager
    first_pass: int = 0                                      # recompiles over the factory's (different) calls
    repeats: int = 0                                         # recompiles in the repeat passes: instability
    generalized: bool | None = None                          # --vary: one recompile per frame at most
    problems: list[str] = field(default_factory=list)


def judge(c: Census, info: GuardRun) -> Stability:
    # The failed compile often has no code location of its own: name it by its frame.
    names = {frame_key(f.compile_id): f.function for f in c.frames if f.function != "?"}
    hits = [f"{names.get(frame_key(f.compile_id), f.function)} ({f.compile_id})"
            for f in c.skipped_frames if _LIMIT_RE.search(f.reason)]
    st = Stability(ok=True, limit_hits=hits, first_pass=sum(r.count - r.repeats for r in c.recompiles),
                   repeats=sum(r.repeats for r in c.recompiles))
    if hits:
        st.problems.append(f"recompile_limit ({info.recompile_limit}) hit: {', '.join(hits)} silently "
                           "runs eagerly from now on")
    if info.mode == "repeat":
        for r in c.recompiles:
            if r.repeats:
                st.problems.append(f"recompiled {r.repeats}x on repeated identical calls (repeat passes): {r.reason}")
    else:
        most = max((recompile_index(f.compile_id) for f in c.frames), default=0)
        st.generalized = bool(c.recompiles) and most <= 1 and not hits
        if c.recompiles and not st.generalized:
            st.problems.append(f"did not generalize: a frame compiled {most + 1} times over sizes {info.sizes}")
    st.ok = not st.problems and not c.error
    return st


@dataclass
class GuardReport:
    """`graphstitch guards --json`."""
    target: str | None
    torch_version: str | None
    run: GuardRun
    ok: bool
    generalized: bool | None
    recompile_limit_hit: list[str]
    problems: list[str]
    first_pass_recompiles: int             # --repeat: over the factory's own calls (they may differ)
    repeat_recompiles: int                 # --repeat: in the identical repeat passes (instability)
    limit_hits: list[LimitHit]             # frames that hit the limit, with the calls that then ran eagerly
    recompiles: list[RecompileCause]       # with advice
    shared_code_advice: str | None
    cache_entries: list[FrameEntries]
    error: ErrorInfo | None
    schema: str = "graphstitch.guards/3"


def report(c: Census, info: GuardRun, st: Stability) -> GuardReport:
    shared = (SHARED_CODE_ADVICE.format(names=", ".join(info.shared_code), what="several objects")
              if c.recompiles and info.shared_code else None)
    return GuardReport(c.target, c.torch_version, info, st.ok, st.generalized, st.limit_hits, st.problems,
                       st.first_pass, st.repeats, c.limit_hits, c.recompiles, shared, cache_entries(c), c.error)
