"""`graphstitch fix`: try the escape hatches that need no edit of the user's source, each as
its own census in a fresh process, and call a candidate verified only when it proves it.

Verified = the site is gone, no new site (a moved break is not a removed one) and no new
skipped frame appeared, outputs equal eager on the factory's calls and on a fresh random
input set, and what the code prints/logs per call at run time is unchanged.

The worker side (``install_wrapper``) runs inside the trial process; the rest runs in the
parent and never imports torch.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import json
import os
import queue
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .analysis import Census, Site, is_torch_file

# Least invasive first: how ranking breaks ties between verified candidates.
INVASIVENESS = {"config": 1, "nonstrict_trace": 2, "leaf_function": 3,
                "custom_op": 4, "allow_in_graph": 5, "disable": 6}
_FLAGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops", "trace_autograd_ops", "trace_numpy")
_LOG_METHODS = ("debug", "info", "warning", "error", "exception", "critical", "log")


# ----------------------------------------------------------------------------- worker side

def _find_function(file: str, function: str, line: int) -> tuple[Any, str, str, Callable]:
    """(owner object, attribute name, module:qualname, function) of the user function whose
    code holds ``file:line``: a module global or a method of a module-level class."""
    real = os.path.realpath(file)
    mod = next((m for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and os.path.realpath(m.__file__) == real), None)
    if mod is None:
        raise LookupError(f"no loaded module for {file}")

    def holds(fn: Any) -> bool:
        code = getattr(fn, "__code__", None)
        if code is None or code.co_name != function or os.path.realpath(code.co_filename) != real:
            return False
        lines = [ln for _, _, ln in code.co_lines() if ln is not None]
        return code.co_firstlineno <= line <= max(lines or [code.co_firstlineno])

    for name, obj in list(vars(mod).items()):
        if holds(obj):
            return mod, name, f"{mod.__name__}:{name}", obj
        if isinstance(obj, type) and getattr(obj, "__module__", None) == mod.__name__:
            for attr, raw in list(vars(obj).items()):
                fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                if holds(fn):
                    if isinstance(raw, (staticmethod, classmethod)):
                        raise LookupError(f"{obj.__name__}.{attr} is a {type(raw).__name__}; not wrapped")
                    return obj, attr, f"{mod.__name__}:{obj.__qualname__}.{attr}", fn
    raise LookupError(f"{function}() at {file}:{line} is not a module-level function or method")


def _flat(x: Any) -> list | None:
    if _is_tensor(x):
        return [x]
    if isinstance(x, (tuple, list)) and all(_is_tensor(v) for v in x):
        return list(x)
    return None


def _is_tensor(x: Any) -> bool:
    import torch
    return isinstance(x, torch.Tensor)


def _derive_fake(fn: Callable, calls: list, owner: Any, attr: str) -> tuple[Callable, str]:
    """Run the calls eagerly once, recording ``fn``'s inputs and outputs, and derive a fake
    (shape function) and an op schema from them. Each output must have the shape of one
    tensor argument in every recorded call, or one fixed shape."""
    import torch
    seen: list[tuple[tuple, Any]] = []

    def recorder(*args, **kwargs):
        out = fn(*args, **kwargs)
        seen.append((args, out))
        return out
    setattr(owner, attr, recorder)
    try:
        with torch.no_grad():
            for f, a, k in calls:
                torch.manual_seed(0)
                f(*a, **k)
    finally:
        setattr(owner, attr, fn)
    if not seen:
        raise LookupError("the function was never called eagerly; no fake can be derived")
    kinds = {type(a).__name__ for args, _ in seen for a in args}
    if not kinds <= {"Tensor", "Parameter", "int", "float", "bool"}:
        raise TypeError(f"arguments of type {sorted(kinds)} cannot cross an opaque op")
    outs = [_flat(o) for _, o in seen]
    if any(o is None for o in outs) or len({len(o) for o in outs}) != 1:
        raise TypeError("outputs are not a tensor or a fixed-length tuple of tensors")
    rules: list[tuple[str, Any, Any]] = []
    for j in range(len(outs[0])):
        dtype = outs[0][j].dtype
        src = next((i for i in range(len(seen[0][0]))
                    if all(_is_tensor(args[i]) and args[i].shape == o[j].shape for (args, _), o in zip(seen, outs))), None)
        if src is not None:
            rules.append(("like", src, dtype))
        elif len({tuple(o[j].shape) for o in outs}) == 1:
            rules.append(("fixed", tuple(outs[0][j].shape), dtype))
        else:
            raise TypeError("output shapes follow no input; no fake can be derived from the eager run")
    single = _is_tensor(seen[0][1])
    as_tuple = isinstance(seen[0][1], tuple)

    def fake(*args, **kwargs):
        res = [args[r[1]].new_empty(args[r[1]].shape, dtype=r[2]) if r[0] == "like"
               else torch.empty(r[1], dtype=r[2]) for r in rules]
        return res[0] if single else (tuple(res) if as_tuple else res)
    types = {"Tensor": "Tensor", "Parameter": "Tensor", "int": "SymInt", "float": "float", "bool": "bool"}
    params = ", ".join(f"{types[type(a).__name__]} a{i}" for i, a in enumerate(seen[0][0]))
    ret = "Tensor" if single else ("(" + ", ".join("Tensor" for _ in rules) + ")" if as_tuple else "Tensor[]")
    return fake, f"({params}) -> {ret}"


def install_wrapper(wrap: dict, calls: list) -> str:
    """Replace the user function at ``wrap['file']:wrap['line']`` by an escape hatch around it
    (in its owner and wherever another module imported it). Returns module:qualname."""
    from . import dynamo
    owner, attr, qualname, fn = _find_function(wrap["file"], wrap["function"], int(wrap["line"]))
    how = wrap["how"]
    fake = schema = None
    if how in ("leaf_function", "custom_op"):
        fake, schema = _derive_fake(fn, calls, owner, attr)
    name = re.sub(r"\W", "_", qualname)
    new = dynamo.hatch(how, fn, fake=fake, schema=schema, name=name)
    setattr(owner, attr, new)
    if isinstance(owner, type(sys)):
        for m in list(sys.modules.values()):
            d = getattr(m, "__dict__", None)
            if d and not is_torch_file(getattr(m, "__file__", None) or "torch/"):
                for k, v in list(d.items()):
                    if v is fn:
                        d[k] = new
    return qualname


# ----------------------------------------------------------------------------- candidates

@dataclasses.dataclass
class Candidate:
    kind: str            # config | a hatch name
    label: str
    patches: dict

    @property
    def key(self) -> str:
        return json.dumps(self.patches, sort_keys=True)


def candidates(site: Site) -> list[Candidate]:
    """What can be tried for this site without editing the user's source."""
    out: list[Candidate] = []
    text = " ".join([site.gb_type, site.explanation] + list(site.hints))
    for flag in _FLAGS:
        if flag in text or (flag == "capture_scalar_outputs" and site.gb_id in ("GB0124", "GB0033")) \
                or (flag == "capture_dynamic_output_shape_ops" and site.gb_id == "GB0036"):
            out.append(Candidate("config", f"config {flag}=True", {"config": {flag: True}}))
    code = site.code or ""
    if re.search(r"\bprint\s*\(", code):
        out.append(Candidate("config", "config reorderable_logging_functions={print}",
                             {"config": {"reorderable_logging_functions": ["builtins.print"]}}))
    if site.gb_id == "GB0291" or re.search(r"\b(log|logger|logging)\.\w+\(", code):
        used = [m for m in _LOG_METHODS if re.search(rf"\.{m}\(", code)] or list(_LOG_METHODS)
        out.append(Candidate("config", "config ignore_logging_functions={" + ", ".join(f"Logger.{m}" for m in used) + "}",
                             {"config": {"ignore_logging_functions": [f"logging.Logger.{m}" for m in used]}}))
    # Wrappers go on the function holding the break (a library one is wrapped from the
    # user's side), and on the innermost project function that calls into it; never on the
    # compiled entry itself (wrapping that just stops compiling it). nested_graph_breaks
    # is not tried: it merges reports of a break, it never removes one.
    effects = re.search(r"\bprint\s*\(|\blog", code) is not None
    for fr in _wrap_targets(site):
        for how in ("nonstrict_trace", "leaf_function", "custom_op", "allow_in_graph", "disable"):
            if how == "allow_in_graph" and not effects:
                continue  # only tried where it matters: it drops run-time side effects
            out.append(Candidate(how, f"{how} on {fr['function']}()",
                                 {"wrap": {"file": fr["file"], "line": fr["line"], "function": fr["function"], "how": how}}))
    return out


def _wrap_targets(site: Site) -> list[dict]:
    """Frames whose function a wrapper may go on: the site's own, plus the innermost frame
    inside the project when the site is in a library. Only frames below the compiled entry
    count (its depth is the site's nesting_depth); the entry itself is never wrapped."""
    frames = [fr for fr in site.stack if not is_torch_file(fr.get("file", ""))
              and fr.get("function") not in ("_call_impl", "_wrapped_call_impl")]
    inner = frames[len(frames) - site.nesting_depth + 1:] if site.nesting_depth > 1 else []
    inner = [fr for fr in inner if os.path.isfile(fr.get("file", "")) and fr.get("function") not in ("?", "<module>")]
    if not inner:
        return []
    out = [inner[-1]]
    if not _inside_project(inner[-1]["file"]):
        mine = [fr for fr in inner if _inside_project(fr["file"])]
        if mine:
            out.append(mine[-1])
    return out


# ----------------------------------------------------------------------------- trials

def site_name(gb_id: str, file: str, line: int) -> str:
    from .report import short_path
    return f"{gb_id} {short_path(file)}:{line}"


def _counts(c: Census) -> dict:
    return {"graphs": c.graph_count, "sites": len(c.sites), "break_events": c.break_events,
            "skipped_frames": len(c.skipped_frames)}


def evaluate(site: Site, cand: Candidate, base: Census, trial: Census) -> dict:
    """One row of `fixes[]`: what the trial proved about this candidate for this site."""
    base_keys = {s.key for s in base.sites}
    why: list[str] = []
    if trial.error:
        why.append(f"error ({trial.error.get('kind')}): {trial.error.get('type', '')} "
                   f"{str(trial.error.get('message', '')).strip().splitlines()[0][:200] if trial.error.get('message') else ''}".replace("  ", " "))
    still = any(s.key == site.key for s in trial.sites)
    new_sites = [site_name(*s.key) for s in trial.sites if s.key not in base_keys]
    base_skips = {(f.function, f.file, f.line) for f in base.skipped_frames}
    new_skips = [f"{f.function} {f.file}:{f.line}" for f in trial.skipped_frames
                 if (f.function, f.file, f.line) not in base_skips]
    outputs = bool(trial.outputs_match_eager) and trial.checks.get("fresh_outputs_match") is True
    effects = trial.checks.get("side_effects_kept")
    if not trial.error:
        if still:
            why.append("site still present")
        if new_sites:
            why.append("moved, not removed: new site " + ", ".join(new_sites))
        if new_skips:
            why.append("new skipped frame " + ", ".join(new_skips))
        if not outputs:
            why.append("outputs differ from eager: " + str(trial.output_mismatch or trial.checks.get("fresh_mismatch")
                                                           or trial.checks.get("fresh_error") or "not checked"))
        if effects is False:
            se = trial.checks.get("side_effects") or {}
            why.append(f"side effect lost at run time (call {se.get('call')}: eager {len(se.get('eager', []))} "
                       f"print/log, compiled {len(se.get('compiled', []))})")
    return {"site": site_name(*site.key), "candidate": cand.label, "kind": cand.kind,
            "patches": cand.patches,
            "wrapped": trial.config.get("wrapped"),
            "verified": not why, "before": _counts(base), "after": _counts(trial),
            "site_gone": not still and not trial.error, "outputs_match": outputs,
            "side_effects_kept": effects, "new_sites": new_sites, "new_skipped_frames": new_skips,
            "error": trial.error, "why_not": why}


def rank(fixes: list[dict]) -> list[dict]:
    """Per site: verified first, then fewest graphs, then least invasive."""
    order = {f["site"]: i for i, f in reversed(list(enumerate(fixes)))}
    return sorted(fixes, key=lambda f: (order[f["site"]], not f["verified"], f["after"]["graphs"],
                                        INVASIVENESS.get(f["kind"], 9), f["candidate"]))


def run_fix(spec: str, opts, *, jobs: int | None = None, timeout: float | None = None,
            base: Census | None = None, only: Callable[[Site], bool] | None = None,
            kinds: set[str] | None = None) -> Census:
    """Census the target, then one trial census per distinct candidate, in parallel.
    Returns the baseline census with ``advice`` and ``fixes`` filled in."""
    from .target import spawn_worker
    opts = dataclasses.replace(opts, fresh=True, patches=None)
    jobs = max(1, jobs or os.cpu_count() or 1)
    # Trial workers import torch while the baseline runs; each still runs one trial only.
    warm = queue.SimpleQueue()
    for _ in range(jobs):
        warm.put(spawn_worker())
    try:
        return _run_fix(spec, opts, jobs, timeout, base, only, kinds, warm)
    finally:
        while not warm.empty():  # idle workers hold no job: stop them, don't wait for imports
            p = warm.get()
            p.kill()
            p.wait()


def _run_fix(spec, opts, jobs, timeout, base, only, kinds, warm) -> Census:
    from .advice import advise
    from .target import census_subprocess, spawn_worker
    tfile = target_file(spec)
    hashes = {tfile: file_hash(tfile)} if tfile and os.path.isfile(tfile) else {}
    if base is None:
        base, _ = census_subprocess(spec, opts, timeout=timeout)
    for s in base.sites:  # --apply refuses a file that changed after this point
        real = os.path.realpath(s.file)
        if real not in hashes and os.path.isfile(real):
            hashes[real] = file_hash(real)
    base.checks["source_sha256"] = hashes
    advise(base)
    if base.error:
        return base
    pairs = [(s, c) for s in base.sites if only is None or only(s) for c in candidates(s)
             if kinds is None or c.kind in kinds]
    unique = {c.key: c for _, c in pairs}

    left = [len(unique)]
    lock = threading.Lock()

    def trial(c: Candidate) -> Census:
        with lock:
            left[0] -= 1
            proc = warm.get() if not warm.empty() else spawn_worker()
            if left[0] >= jobs:
                warm.put(spawn_worker())  # ready for a later trial
        return census_subprocess(spec, dataclasses.replace(opts, patches=c.patches), timeout=timeout, proc=proc)[0]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        results = dict(zip(unique, ex.map(trial, unique.values())))
    base.fixes = rank([evaluate(s, c, base, results[c.key]) for s, c in pairs])
    return base


def best(census: Census, site: str | None = None) -> dict | None:
    for f in census.fixes:
        if f["verified"] and (site is None or f["site"] == site) and patch_supported(f):
            return f
    return None


# ----------------------------------------------------------------------------- patches

def patch_supported(fix: dict) -> bool:
    """Only patches graphstitch can write as plain source: config lines and decorators
    that need no generated fake."""
    return fix["kind"] in ("config", "nonstrict_trace", "disable")


def file_hash(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _after_imports(tree: ast.Module, lines: list[str]) -> int:
    """0-based index after the module docstring and the leading imports."""
    idx = 0
    for node in tree.body:
        is_doc = isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) \
            and isinstance(node.value.value, str)
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (is_doc and idx == 0):
            idx = node.end_lineno or node.lineno
        else:
            break
    return idx


def _config_line(fix: dict) -> list[str]:
    out = []
    for k, v in (fix["patches"].get("config") or {}).items():
        if isinstance(v, list):
            names = ", ".join(n.replace("builtins.", "") for n in v)
            v_src = "{" + names + "}"
        else:
            v_src = repr(v)
        out.append(f"torch._dynamo.config.{k} = {v_src}  # graphstitch fix")
    return out


def plan_patch(fix: dict, target_file: str) -> tuple[str, str, str]:
    """(file to edit, old text, new text) that makes ``fix`` permanent. Config lines go at
    the top of the target file; a decorator goes on the user's function; a function outside
    the project (a library) is wrapped from the target file instead."""
    wrap = fix["patches"].get("wrap")
    path = target_file
    if wrap and _inside_project(wrap["file"]):
        path = wrap["file"]
    with open(path, encoding="utf-8") as f:
        old = f.read()
    lines = old.splitlines(keepends=True)
    tree = ast.parse(old)
    needs_torch = not re.search(r"^import torch\b", old, re.M)
    top = _after_imports(tree, lines)
    if not wrap:
        add = (["import torch\n"] if needs_torch else []) + [ln + "\n" for ln in _config_line(fix)]
        new_lines = lines[:top] + add + lines[top:]
        return path, old, "".join(new_lines)
    hatch = {"nonstrict_trace": "torch._dynamo.nonstrict_trace", "disable": "torch.compiler.disable"}[wrap["how"]]
    if path == wrap["file"]:
        node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == wrap["function"] and n.lineno <= wrap["line"] <= (n.end_lineno or n.lineno)), None)
        if node is None:
            raise LookupError(f"cannot find {wrap['function']}() in {path}")
        first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
        new_lines = lines[:first] + [f"{indent}@{hatch}  # graphstitch fix\n"] + lines[first:]
        if needs_torch:
            new_lines = new_lines[:top] + ["import torch\n"] + new_lines[top:]
        return path, old, "".join(new_lines)
    mod, _, qual = (fix.get("wrapped") or "").partition(":")
    if not mod:
        raise LookupError("the trial did not say which function it wrapped")
    obj = f"{mod}.{qual}"
    add = (["import torch\n"] if needs_torch else []) + [
        f"import {mod}  # graphstitch fix: wrap a library function from your code\n",
        f"{obj} = {hatch}({obj})  # graphstitch fix\n"]
    return path, old, "".join(lines[:top] + add + lines[top:])


def unified_diff(path: str, old: str, new: str) -> str:
    from .report import short_path
    rel = short_path(path)
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{rel}", tofile=f"b/{rel}"))


def _inside_project(path: str, root: str | None = None) -> bool:
    real = os.path.realpath(path)
    root = os.path.realpath(root or os.getcwd())
    return real.startswith(root + os.sep) and not re.search(r"[\\/](site|dist)-packages[\\/]", real)


def refuse_reason(path: str, expected_hash: str | None) -> str | None:
    if not _inside_project(path):
        return f"{path} is not under the current project directory (or is an installed package); not editing it"
    if expected_hash is None or file_hash(path) != expected_hash:
        return f"{path} changed since the census; run `graphstitch fix` again"
    return None


def target_file(spec: str) -> str | None:
    """The source file of a target spec (PATH.py:FACTORY or module:FACTORY)."""
    where = spec.rpartition(":")[0]
    if where.endswith(".py") or "/" in where or os.sep in where:
        return os.path.realpath(where)
    import importlib.util
    try:
        found = importlib.util.find_spec(where)
    except (ImportError, ValueError):
        return None
    return os.path.realpath(found.origin) if found and found.origin else None


def _line_map(old: str, new: str) -> dict[int, int]:
    """New line number -> old line number for lines the patch did not touch."""
    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    out: dict[int, int] = {}
    for tag, i1, i2, j1, _ in sm.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                out[j1 + k + 1] = i1 + k + 1
    return out


def _reverify(fix: dict, census: Census, spec: str, opts, path: str, old: str, new: str,
              timeout: float | None) -> dict:
    """Census a copy of the target with the patch written, mapped back to the original
    file's paths and lines, and evaluated like a trial."""
    import shutil
    import tempfile
    from .target import census_subprocess
    tfile = target_file(spec)
    if tfile is None or os.path.dirname(path) != os.path.dirname(tfile):
        raise LookupError("the patched file is not beside the target file; cannot re-verify it on a copy")
    with tempfile.TemporaryDirectory(prefix="graphstitch-fix-") as tmp:
        copies = {os.path.join(tmp, os.path.basename(tfile)): tfile, os.path.join(tmp, os.path.basename(path)): path}
        shutil.copy2(tfile, os.path.join(tmp, os.path.basename(tfile)))
        with open(os.path.join(tmp, os.path.basename(path)), "w", encoding="utf-8") as f:
            f.write(new)
        t_spec = os.path.join(tmp, os.path.basename(tfile)) + ":" + spec.rpartition(":")[2]
        trial, _ = census_subprocess(t_spec, dataclasses.replace(opts, fresh=True, patches=None),
                                     timeout=timeout, pythonpath=os.path.dirname(tfile))
        lines = _line_map(old, new)
        for item in list(trial.sites) + list(trial.skipped_frames):
            orig = copies.get(os.path.realpath(item.file)) or copies.get(item.file)
            if orig is not None:
                item.line = lines.get(item.line, item.line) if orig == path else item.line
                item.file = orig
    site = next(s for s in census.sites if site_name(*s.key) == fix["site"])
    return evaluate(site, Candidate(fix["kind"], fix["candidate"], fix["patches"]), census, trial)


def apply_best(census: Census, spec: str, opts, *, write: bool, timeout: float | None = None) -> tuple[str, bool]:
    """The diff for the best verified candidate (and, with ``write``, apply it). Returns
    (message, ok); never raises for a refusal."""
    from .report import atomic_write
    fix = best(census)
    if fix is None:
        return "no verified candidate that graphstitch can write as a source patch", False
    tfile = target_file(spec)
    if tfile is None:
        return f"cannot find the source file of {spec}", False
    try:
        path, old, new = plan_patch(fix, tfile)
    except (LookupError, OSError, SyntaxError) as e:
        return f"cannot write a patch for {fix['candidate']}: {e}", False
    diff = unified_diff(path, old, new)
    if not write:
        return diff, True
    why = refuse_reason(path, census.checks.get("source_sha256", {}).get(os.path.realpath(path)))
    if why:
        return why, False
    try:
        check = _reverify(fix, census, spec, opts, path, old, new, timeout)
    except LookupError as e:
        return str(e), False
    if not check["verified"]:
        return "the patched copy did not verify: " + "; ".join(check["why_not"]), False
    why = refuse_reason(path, census.checks.get("source_sha256", {}).get(os.path.realpath(path)))
    if why:
        return why, False
    backup = path + ".graphstitch.bak"
    atomic_write(backup, old)
    try:
        atomic_write(path, new)
    except BaseException:
        atomic_write(path, old)  # the backup is still there too
        raise
    from .report import short_path
    return f"{diff}\napplied {fix['candidate']} to {short_path(path)} (backup: {short_path(backup)})", True


def render_fixes(census: Census, console=None) -> None:
    """Trials per site, best first, one line each (reads census.fixes only; readable at 80
    columns and in CI logs)."""
    from rich.console import Console
    from rich.markup import escape
    console = console or Console(highlight=False)
    if not census.fixes:
        console.print("[dim]No fix candidates tried.[/]")
        return
    for site in dict.fromkeys(f["site"] for f in census.fixes):
        console.print(f"\n[bold underline]Fixes for {escape(site)}[/]")
        for f in (f for f in census.fixes if f["site"] == site):
            b, a = f["before"], f["after"]
            mark = "[bold green]VERIFIED[/]" if f["verified"] else "[red]rejected[/]"
            console.print(f"  {mark} {escape(f['candidate'])} · graphs {b['graphs']}→{a['graphs']} · "
                          f"sites {b['sites']}→{a['sites']}")
            for why in f["why_not"]:
                console.print(f"      [dim]{escape(why)}[/]")


# ----------------------------------------------------------------------------- --measure

class _Timed:
    """A worker process holding the target compiled one way (before: as is; after: with a
    fix's patches), timing one pass over the factory's calls per request."""

    def __init__(self, spec: str, opts, timeout: float | None):
        import subprocess
        from .target import worker_env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "graphstitch.fix", "--timed", spec, json.dumps(dataclasses.asdict(opts))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=worker_env(None), start_new_session=True)
        self.timeout = timeout
        self._ask("ready")

    def _ask(self, what: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the measuring process exited (code {self.proc.wait()})")
        if line.startswith("error "):
            raise RuntimeError(line[6:].strip())
        return line

    def one_pass(self) -> float:
        return float(self._ask("pass"))

    def close(self) -> None:
        import signal
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def _timed_worker(spec: str, opts_json: str) -> int:
    """`python -m graphstitch.fix --timed SPEC OPTIONS`: compile the target (with its patches),
    warm it up, then answer "pass" with the seconds one pass over the calls took."""
    import contextlib as _cl
    import torch
    from . import dynamo
    from .perf import _device_of, _timer
    from .target import Options, load_factory, make_calls
    opts = Options(**json.loads(opts_json))
    out = sys.stdout
    sys.stdout = sys.stderr  # the target's prints must not corrupt the protocol
    dynamo.quiet_dynamo_warnings()
    try:
        calls = make_calls(load_factory(spec), spec)
        patches = opts.patches or {}
        if patches.get("wrap"):
            install_wrapper(patches["wrap"], calls)
        stack = _cl.ExitStack()
        stack.enter_context(torch.no_grad() if not opts.grad else _cl.nullcontext())
        stack.enter_context(dynamo.config(**dynamo.resolve_config(patches.get("config") or {})))
        compiled = {}
        for fn, _, _ in calls:
            compiled.setdefault(id(fn), torch.compile(fn, backend=opts.backend))
        run = [(compiled[id(fn)], a, k) for fn, a, k in calls]

        def one_pass() -> None:
            for f, a, k in run:
                f(*a, **k)
        one_pass()  # compiles
        timed = _timer(_device_of([a for _, a, _ in run] + [fn for fn, _, _ in calls]))
    except Exception as e:  # noqa: BLE001 - reported to the parent as one line
        out.write(f"error {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}\n")
        out.flush()
        return 1
    with stack:
        for line in sys.stdin:
            cmd = line.strip()
            out.write(("ok" if cmd == "ready" else repr(timed(one_pass))) + "\n")
            out.flush()
    return 0


def measure_fixes(census: Census, spec: str, opts, *, repeats: int = 20, warmup: int = 3,
                  max_seconds: float = 20.0, timeout: float | None = None) -> None:
    """`fix --measure`: for each verified fix, steady-state latency before and after with the
    user's backend, the two compiled variants timed alternately in one run (each in its own
    process: a run-time wrapper cannot coexist with the unwrapped code in one). Fills
    ``fix["measure"]`` = {before, after (perf.stats), speedup, stable, backend}."""
    from .perf import alternate
    for f in census.fixes:
        if not f.get("verified"):
            continue
        sides: list[_Timed] = []
        try:
            sides.append(_Timed(spec, dataclasses.replace(opts, patches=None, fresh=False), timeout))
            sides.append(_Timed(spec, dataclasses.replace(opts, patches=f["patches"], fresh=False), timeout))
            (b, a), stable, _ = alternate([s.one_pass for s in sides], repeats=repeats, warmup=warmup,
                                          max_seconds=max_seconds, self_timed=True)
            f["measure"] = {"backend": opts.backend, "before": b, "after": a, "stable": stable,
                            "speedup": b["median_s"] / a["median_s"] if a["median_s"] > 0 else None}
        except RuntimeError as e:
            f["measure"] = {"backend": opts.backend, "error": str(e)}
        finally:
            for s in sides:
                s.close()


def render_measures(census: Census, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    console = console or Console(highlight=False)
    rows = [f for f in census.fixes if f.get("measure")]
    if not rows:
        return
    console.print("\n[bold underline]What the verified fixes buy[/] (median of alternating passes)")
    for f in rows:
        m = f["measure"]
        head = f"  {escape(f['site'])} · {escape(f['candidate'])}"
        if m.get("error"):
            console.print(f"{head}: [red]not measured[/] ({escape(m['error'])})")
            continue
        b, a = m["before"]["median_s"] * 1e3, m["after"]["median_s"] * 1e3
        note = "" if m["stable"] else " [yellow](not stable)[/]"
        console.print(f"{head}: {b:.3f} ms → {a:.3f} ms · [bold]{m['speedup']:.2f}×[/] ({escape(m['backend'])}){note}")


if __name__ == "__main__" and sys.argv[1:2] == ["--timed"]:
    sys.exit(_timed_worker(sys.argv[2], sys.argv[3]))
