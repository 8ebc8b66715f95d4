"""Advice for every break site: a strategy family for every GB id, curated playbooks for
the common ones.

No torch import: advice reads the Census and the registry JSON only. The strategy of an id
without a playbook is derived from its registry text (Gb_type, Explanation, Hints) by
keyword rules, so a torch upgrade that adds ids still gets advice.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from .analysis import gb_registry
from .model import Advice, Census, NextStep, RecompileCause, Site, gb_text
from .paths import is_internal, is_library

# Strategy families, in the words the advice shows.
STRATEGIES = {
    "rewrite": "rewrite the code",
    "config": "a torch._dynamo.config flag",
    "nonstrict_trace": "torch._dynamo.nonstrict_trace",
    "leaf_function": "torch._dynamo.decorators.leaf_function + register_fake",
    "custom_op": "torch.library.custom_op + register_fake",
    "allow_in_graph": "torch.compiler.allow_in_graph",
    "move_out": "move it out of the compiled region (torch.compiler.disable, or split the function)",
    "shapes": "shapes: torch._dynamo.mark_dynamic / torch.compile(dynamic=...)",
    "print_hop": "torch._higher_order_ops.print instead of print",
    "functional_collectives": "functional collectives (torch.distributed._functional_collectives)",
    "none": "no escape hatch applies",
}

# Keyword rules on the registry text, first match wins. Order matters: specific flags
# named in the hints before broad words like "data dependent".
_RULES: list[tuple[str, str]] = [
    (r"capture_scalar_outputs|capture_dynamic_output_shape_ops|reorderable_logging_functions|"
     r"ignore_logging_functions|trace_autograd_ops|logging\.logger|trace_numpy", "config"),
    (r"\bprint\b", "print_hop"),
    (r"distributed|collective|process ?group|p2p|dtensor|device ?mesh", "functional_collectives"),
    (r"torch\.compiler\.disable|disable\(\)d", "move_out"),
    (r"symbolic shape|dynamic shape|mark_dynamic|recompil|specializ|guard on", "shapes"),
    (r"nonstrict_trace", "rewrite"),
    (r"marked as skipped|skipfiles|c extension|third.party|numpy|pybind", "custom_op"),
    (r"data.dependent|generic_jump|jump", "rewrite"),
    (r"does not know how to trace|unsupported function call|unsupported method call|builtin|"
     r"inline", "nonstrict_trace"),
    (r"hook|backward|autograd|requires_grad|side effect", "move_out"),
    (r"dynamo bug|internal|unexpected|should not happen|fundamental|export", "none"),
]


def _registry_text(entry: dict[str, Any]) -> str:
    hints = " ".join(entry.get("Hints") or [])
    return f"{entry.get('Gb_type', '')} {entry.get('Explanation', '')} {hints}".lower()


def strategy_for(gb_id: str, entry: dict[str, Any] | None = None) -> str:
    """The strategy family of a GB id: the playbook's if curated, else from its text."""
    if gb_id in PLAYBOOKS:
        return PLAYBOOKS[gb_id]["strategy"]
    text = _registry_text(entry if entry is not None else gb_registry().get(gb_id, {}))
    for pattern, family in _RULES:
        if re.search(pattern, text):
            return family
    return "rewrite"


def _p(strategy: str, cause: str, before: str, after: str, more: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"strategy": strategy, "cause": cause, "before": before, "after": after, "more": list(more)}


# Curated playbooks for the ids real models break on most (ids checked against torch 2.13's
# graph_break_registry.json).
PLAYBOOKS: dict[str, dict[str, Any]] = {
    "GB0124": _p("config", "`.item()` turns a tensor into a Python number; by default Dynamo stops the graph there.",
                 "scale = h.abs().mean().item()\nreturn h / scale",
                 "torch._dynamo.config.capture_scalar_outputs = True   # or keep it a tensor:\nscale = h.abs().mean()\nreturn h / scale",
                 ("custom_op", "move_out")),
    "GB7000": _p("rewrite", "A graph break inside a for/while loop makes Dynamo give up on the whole function: it runs fully eager.",
                 "for blk in self.blocks:\n    h = blk(h)\n    print(h.norm())",
                 "for blk in self.blocks:\n    h = blk(h)\n# log after the loop, or fix the inner break (see the root GB id)",
                 ("nonstrict_trace", "move_out")),
    "GB0036": _p("config", "An op whose output shape depends on tensor values (`nonzero`, boolean mask, `unique`).",
                 "idx = x.nonzero()\ny = x[x > 0]",
                 "torch._dynamo.config.capture_dynamic_output_shape_ops = True\n# or keep shapes static:\ny = torch.where(x > 0, x, 0)",
                 ("rewrite",)),
    "GB0033": _p("config", "An op returns a Python value computed from tensor data (`tolist`, `item` on int tensors).",
                 "sizes = lengths.tolist()", "torch._dynamo.config.capture_scalar_outputs = True\n# or keep `lengths` a tensor",
                 ("rewrite",)),
    "GB4347": _p("rewrite", "Dynamo cannot call next() on this kind of object (an iterator type it has no model for).",
                 "it = iter(my_custom_iterable)\nx = next(it)", "items = list(my_custom_iterable)   # outside the compiled function\nx = items[0]",
                 ("nonstrict_trace",)),
    "GB0170": _p("rewrite", "`if` on a tensor value: the branch taken depends on data, so one graph cannot hold both paths.",
                 "if h.sum() > 0:\n    h = h.relu()", "h = torch.where(h.sum() > 0, h.relu(), h)\n# or torch.cond(h.sum() > 0, true_fn, false_fn, (h,))",
                 ("move_out",)),
    "GB0059": _p("print_hop", "A builtin Dynamo cannot trace here, most often `print` of a tensor.",
                 "print('h', h)", "torch._higher_order_ops.print('h {}', h)\n# or torch._dynamo.config.reorderable_logging_functions = {print}:\n"
                 "# on torch 2.13 a print in an inlined helper then never runs (`graphstitch fix` checks)",
                 ("config", "leaf_function")),
    "GB0291": _p("config", "A `logging.Logger` call inside the compiled region.",
                 "log.debug('hidden %s', h.shape)",
                 "@torch._dynamo.decorators.leaf_function  # runs eagerly, once per call\ndef log_hidden(h): log.debug('hidden %s', h.shape); return (h,)\n# ignore_logging_functions drops the message entirely",
                 ("leaf_function", "move_out")),
    "GB0007": _p("custom_op", "The call goes to a function Dynamo refuses to trace (C extension, I/O, a skipped library).",
                 "y = my_ext.fused(x)",
                 "@torch.library.custom_op('mylib::fused', mutates_args=())\ndef fused(x: torch.Tensor) -> torch.Tensor: return my_ext.fused(x)\n@fused.register_fake\ndef _(x): return torch.empty_like(x)",
                 ("leaf_function", "allow_in_graph", "move_out")),
    "GB0008": _p("custom_op", "Dynamo was told not to inline this function (skipped module or function).",
                 "y = skipped_helper(x)", "wrap skipped_helper in torch.library.custom_op with a register_fake",
                 ("nonstrict_trace", "move_out")),
    "GB0025": _p("rewrite", "An explicit `torch._dynamo.graph_break()` in the code.",
                 "torch._dynamo.graph_break()", "# delete the call if it is no longer needed", ()),
    "GB0206": _p("move_out", "Setting `requires_grad` on a tensor inside the compiled region.",
                 "w.requires_grad = True\nloss = f(w)", "w.requires_grad_(True)   # before calling the compiled function\nloss = compiled_f(w)", ()),
    "GB0125": _p("move_out", "`requires_grad_()` inside the compiled region.",
                 "x.requires_grad_()", "x.requires_grad_()  # before the compiled call", ()),
    "GB0225": _p("rewrite", "Creating a tensor with `requires_grad=True` inside the compiled region.",
                 "w = torch.zeros(3, requires_grad=True)", "# create parameters outside; pass them in or register them on the module", ()),
    "GB9186": _p("config", "`torch.autograd.grad` inside the compiled region with trace_autograd_ops off.",
                 "g, = torch.autograd.grad(loss, x)", "torch._dynamo.config.trace_autograd_ops = True\n# or compute the grad outside the compiled function",
                 ("move_out",)),
    "GB0123": _p("config", "`Tensor.backward()` inside the compiled region with trace_autograd_ops off.",
                 "loss.backward()", "loss = compiled_forward(x)\nloss.backward()   # outside",
                 ("move_out",)),
    "GB0142": _p("move_out", "A context manager Dynamo has no model for (custom `with` block, timers, profilers).",
                 "with Timer():\n    y = model(x)", "y = model(x)   # keep the context manager outside the compiled function",
                 ("nonstrict_trace",)),
    "GB0262": _p("move_out", "A contextlib API Dynamo cannot trace.",
                 "with contextlib.ExitStack() as s: ...", "# enter the context outside the compiled function", ()),
    "GB0274": _p("rewrite", "A context manager object is used in a way Dynamo cannot rebuild after a break.",
                 "cm = ctx(); with cm: ...", "with ctx():  # create and enter in one statement, no break inside", ()),
    "GB0147": _p("nonstrict_trace", "A call to a function Dynamo does not know how to trace.",
                 "y = opaque(x)", "y = torch._dynamo.nonstrict_trace(opaque)(x)",
                 ("custom_op", "move_out")),
    "GB0156": _p("nonstrict_trace", "A method Dynamo does not know how to trace on this object.",
                 "y = obj.method(x)", "@torch._dynamo.nonstrict_trace\ndef call_method(obj, x): return obj.method(x)", ("custom_op",)),
    "GB0148": _p("nonstrict_trace", "Dynamo decided (after looking at the callee) that the call must break.",
                 "y = helper(x)", "@torch._dynamo.nonstrict_trace\ndef helper(x): ...", ("move_out",)),
    "GB0098": _p("move_out", "The call goes to a `torch.compiler.disable`d function: a break by design.",
                 "y = disabled_helper(x)", "# remove torch.compiler.disable if the body is traceable now", ("rewrite",)),
    "GB0099": _p("move_out", "Inlining a `torch.compiler.disable`d function: a break by design.",
                 "y = disabled_helper(x)", "# remove torch.compiler.disable if the body is traceable now", ("rewrite",)),
    "GB0109": _p("rewrite", "`tolist()` on a float tensor.",
                 "vals = x.tolist()", "# keep it a tensor, or call tolist() outside the compiled function", ("move_out",)),
    "GB0179": _p("move_out", "`copy.deepcopy` inside the compiled region.",
                 "state = copy.deepcopy(self.state)", "state = {k: v.clone() for k, v in self.state.items()}", ("rewrite",)),
    "GB0105": _p("config", "`Tensor.numpy()` with trace_numpy disabled.",
                 "a = x.numpy()", "torch._dynamo.config.trace_numpy = True\n# or stay in torch ops", ("rewrite",)),
    "GB0003": _p("rewrite", "A generator function was compiled directly.",
                 "torch.compile(gen_fn)", "compile the function the generator calls, not the generator", ()),
    "GB0251": _p("rewrite", "A `nonstrict_trace` function returned a type Dynamo cannot pass out (the hatch moved the break).",
                 "@nonstrict_trace\ndef f(x): return SomeObject(x)", "return tensors / ints / lists from nonstrict_trace functions", ()),
    "GB0175": _p("rewrite", "`isinstance` on an object whose type Dynamo cannot determine.",
                 "if isinstance(obj, Foo): ...", "# decide the type outside the compiled function", ()),
    "GB0171": _p("rewrite", "`assert` with a non-string message.",
                 "assert x.dim() == 2, x.shape", "assert x.dim() == 2, 'x must be 2-d'", ()),
    "GB0188": _p("rewrite", "Attribute access on an nn.Module created inside the compiled region.",
                 "m = nn.Linear(3, 3); m.weight", "create modules in __init__, not in forward", ()),
    "GB0029": _p("move_out", "Registering a hook on an intermediate tensor needs compiled autograd.",
                 "h.register_hook(fn)", "# register hooks on parameters/inputs outside, or enable compiled autograd", ()),
    "GB0172": _p("functional_collectives", "A distributed collective with `async_op=True`.",
                 "work = dist.all_reduce(t, async_op=True); work.wait()",
                 "import torch.distributed._functional_collectives as funcol\nt = funcol.all_reduce(t, 'sum', group)", ()),
    "GB0072": _p("rewrite", "An in-place view op on an input tensor.",
                 "x.unsqueeze_(0)", "x = x.unsqueeze(0)", ()),
    "GB0000": _p("rewrite", "Every `__torch_function__` override returned NotImplemented (a TypeError in user code).",
                 "class T(torch.Tensor): __torch_function__ = ...", "fix the override so the eager call works", ()),
}


# A call Dynamo skips that is host work by nature: RNG seeding and state, a clock read, Python's
# `random` (keyed by the function Dynamo's explanation names). It belongs to the caller,
# not in a custom op: do it before the compiled call and pass the value in (fix's caller moves).
_HOST_CALL = re.compile(r"function `(?:\w+\.)*(?:manual_seed|seed|initial_seed|get_rng_state|set_rng_state|"
                        r"fork_rng)` in file|builtin `(?:time\.(?:time|perf_counter|monotonic|process_time|"
                        r"thread_time)(?:_ns)?\.|(?:_random|random|<unknown module>\.Random)\.)")
HOST_BOOK = _p("move_out", "A host-side call (RNG seeding or state, a clock, Python's `random`) inside the compiled "
                           "region: Dynamo leaves it to Python, one break per call.",
               "def step(x):\n    torch.manual_seed(0)\n    return model(x)",
               "torch.manual_seed(0)   # in the caller, before the compiled call; a value it gave is passed in\n"
               "y = compiled_step(x)", ("rewrite",))


def _book(site: Site) -> dict[str, Any] | None:
    """The curated text for this site: its GB id's playbook where that is about this site's
    code, the host-call playbook for a host-side call Dynamo skips."""
    if site.gb_id in ("GB0007", "GB0008") and _HOST_CALL.search(site.explanation or ""):
        return HOST_BOOK
    return PLAYBOOKS.get(site.gb_id) if _fits(site) else None


def _loop_at(site: Site) -> str:
    """Where the loop is when the break is in a function it calls: the calling line in the
    frame Dynamo skipped (``nesting_depth`` frames up from the break)."""
    user = [fr for fr in site.stack if not is_internal(fr.file)]
    if site.nesting_depth < 2 or len(user) < site.nesting_depth:
        return ""
    fr = user[-site.nesting_depth]
    code = f": `{fr.code.strip()}`" if fr.code.strip() else ""
    return f" (the loop is in {fr.name}() at {os.path.basename(fr.file)}:{fr.line}{code})"


def _where(site: Site) -> str:
    """The user's own function and line: a site inside a library (logging, a package) is
    named by the innermost frame of the user's code that called into it."""
    here = f"{site.name}() at {os.path.basename(site.file)}:{site.line}"
    if not is_library(site.file):
        return here
    mine = [fr for fr in site.stack if not is_library(fr.file)]
    if not mine:
        return here
    fr = mine[-1]
    return f"{fr.name}() at {os.path.basename(fr.file)}:{fr.line} (inside {here})"


def advice_for(site: Site) -> list[Advice]:
    """Advice for one site, the first entry naming the user's own function and line."""
    gid = site.gb_id
    entry = gb_registry().get(gid, {})
    where = _where(site)
    book = _book(site)
    fam = book["strategy"] if book is not None else strategy_for(gid, entry) if _fits(site) else "rewrite"
    out: list[Advice] = []
    if book is not None:
        first = book["after"].splitlines()[0].split("  #")[0].strip()
        out.append(Advice(fam, f"In {where}: {book['cause']} Try: {first}", book["cause"],
                          book["before"], book["after"], curated=True))
        for alt in book["more"]:
            out.append(Advice(alt, f"Alternative for {where}: {STRATEGIES[alt]}.", STRATEGIES[alt], curated=True))
    else:
        text = site.explanation or entry.get("Explanation", "") or site.gb_type
        hints = site.hints or list(entry.get("Hints") or [])
        out.append(Advice(fam, f"In {where}: {site.gb_type or entry.get('Gb_type', gid)}. Try {STRATEGIES[fam]}.",
                          " ".join([text] + hints).strip()))
    if site.frame_skipped and gid != "GB7000":
        # Only a GB7000 in the chain says "loop"; a frame can be skipped for other reasons.
        if "GB7000" in site.gb_chain:
            out.insert(0, Advice("rewrite", f"In {where}: this break is inside a loop{_loop_at(site)}, so the "
                                            "whole frame ran eager; fixing it (or moving it out of the loop) "
                                            "matters most.",
                                 PLAYBOOKS["GB7000"]["cause"], curated=True))
        else:
            out.insert(0, Advice("rewrite", f"In {where}: Dynamo skipped the whole frame at this break, so it "
                                            "ran eager; fixing this break matters most.", curated=True))
    return out


# ----------------------------------------------------------------------------- recompiles

_SIZE_RE = re.compile(r"tensor(?: '([^']*)')? (size|stride) mismatch at index (\d+)")


def recompile_advice(reason: str) -> list[str]:
    """What to do about one recompile cause (its normalized reason)."""
    m = _SIZE_RE.search(reason)
    if m:
        name, dim = m.group(1) or "x", m.group(3)
        return [f"Mark the dimension dynamic before the first call: torch._dynamo.mark_dynamic({name}, {dim}); "
                "or compile with dynamic=True.",
                "If only a few sizes occur, torch.compiler.set_stance('eager_on_recompile') runs new sizes "
                "eagerly instead of recompiling."]
    if "___check_obj_id" in reason or "___check_type_id" in reason or "ID_MATCH" in reason:
        return ["A different object reached the same code each call (functions or modules made by a factory "
                "share one code object and one cache): compile each with torch.compile(fn, "
                "isolate_recompiles=True), or build the object once and reuse it."]
    if re.search(r"dtype|device|requires_grad|dispatch key", reason, re.I):
        return ["Inputs changed dtype, device or requires_grad: each combination is its own graph. "
                "Convert inputs once before the compiled call."]
    if re.search(r"global state|grad_mode|autocast|GLOBAL_STATE", reason, re.I):
        return ["Global state (grad mode, autocast, default dtype) differed between calls: keep it the same "
                "around the compiled call."]
    if "<value>" in reason:
        return ["A Python scalar is guarded by value, so every new value recompiles: pass it as a tensor "
                "(torch.tensor(v)) or move the state out of the compiled function; for integer nn.Module "
                "attributes set torch._dynamo.config.allow_unspec_int_on_nn_module = True."]
    return ["Make the guarded value stable between calls. In tests, torch.compiler.set_stance("
            "'fail_on_recompile') turns any recompile into an error."]


def cause_advice(cause: RecompileCause) -> list[str]:
    """recompile_advice in each frame's own words: the tensor named as the frame names it
    (`forward(x)` calls `normalize(h)`: mark_dynamic(x, 0) before the call, which is h there)."""
    first = next((cause.names[f] for f in cause.frames if f in cause.names), None)
    reason = _SIZE_RE.sub(lambda m: f"tensor '{first}' {m.group(2)} mismatch at index {m.group(3)}", cause.reason) \
        if first else cause.reason
    out = recompile_advice(reason)
    if cause.expected:
        out = [f"Expected: {cause.expected}. It costs {cause.count} recompile{'s' if cause.count != 1 else ''}; "
               "no fix hides it."]
    elif cause.kind == "scalar" and cause.count <= len(cause.frames) and not cause.repeats:
        # One recompile per frame: automatic dynamic shapes already made the number symbolic.
        out = [f"Automatic dynamic shapes made {cause.subject} symbolic after one recompile; compile with "
               "dynamic=True to skip that one. Pass it as a 0-d tensor only if it feeds tensor math alone "
               "(`graphstitch fix` verifies that no break appears)."]
    elif cause.kind == "object":
        out = [f"A new object reaches {cause.frames[0] if cause.frames else 'the function'} each call "
               f"({cause.subject}): create it once, outside the loop, and reuse it."]
    if cause.site is not None and cause.provenance is not None:
        out.append(f"The guarded value comes from the break at {os.path.basename(cause.provenance.file)}:"
                   f"{cause.provenance.line} ({cause.site.gb_id}): fixing that break removes the guard too.")
    others = [f"{cause.names[f]} in {f}()" for f in cause.frames[1:] if f in cause.names]
    if first and others:
        out[0] += f" (the same tensor is {', '.join(others)})"
    if cause.fan_out:
        out.append(cause.fan_out + ".")
    return out


# Where graphstitch's first advice is not Dynamo's own hint, and why (said next to the hint).
DIFFERS = {
    "GB0291": "Dynamo's hint (ignore_logging_functions) makes Dynamo drop the call: the message is never "
              "logged from compiled code. leaf_function keeps it (run eagerly once per call); pick "
              "ignore_logging_functions if you do not need the message.",
    "GB0059": "Dynamo's hint (reorderable_logging_functions) moves the print after the graph; on torch 2.13 "
              "a print in an inlined helper then never runs. torch._higher_order_ops.print keeps it in order.",
}


# Next steps whose playbook's first line is code that does not read as an action.
NEXT = {
    "GB0291": "move the logging call into a @torch._dynamo.decorators.leaf_function helper (runs eagerly, once per call)",
    "GB0007": "wrap the call in a torch.library.custom_op with a register_fake",
    "GB0059": "use torch._higher_order_ops.print('...{}', t) instead of print",
}


def _fits(site: Site) -> bool:
    """Is the curated text for the site's GB id about this site's code? GB0059 (a builtin
    Dynamo cannot call) is print's id, but also `range` over an ndarray, `id(...)`, ..."""
    return not (site.gb_id == "GB0059" and "print" not in f"{site.code} {site.explanation}")


def next_step_for(site: Site, target: str | None, rerun: str | None = None) -> NextStep:
    """One recommended action and the command that proves it (`graphstitch fix` verifies it).
    RERUN: the command that made this census when it has no TARGET to fix (`run SCRIPT`)."""
    book = _book(site)
    owner = site.owner
    at = (f"{owner.owner.name}() at {os.path.basename(owner.owner.file)}:{owner.owner.line}"
          if owner is not None else f"{site.name}() at {os.path.basename(site.file)}:{site.line}")
    fam = book["strategy"] if book is not None else strategy_for(site.gb_id) if _fits(site) else "rewrite"
    if site.frame_skipped and site.gb_id != "GB7000":
        # As in advice_for: only a GB7000 in the chain says "loop" (a `with` block, a nested call
        # whose frame cannot resume, ... skip a frame too).
        why = f"it is in a loop{_loop_at(site)}" if "GB7000" in site.gb_chain else "Dynamo skipped its frame here"
        action = f"Fix this break first in {at}: {why}, so its whole frame runs eager"
    elif book is HOST_BOOK:
        action = f"In {at}: do this in the caller, before the compiled call, and pass what it gives in"
    elif site.gb_id in NEXT and _fits(site):
        action = f"In {at}: {NEXT[site.gb_id]}"
    elif book is not None:
        action = f"In {at}: " + book["after"].splitlines()[0].split("  #")[0].strip().lstrip("# ")
    else:
        action = f"In {at}: {STRATEGIES[fam]}"
    if owner is not None and owner.chain:
        action += f" (the break itself is in {os.path.basename(site.file)}:{site.line}, library code it calls)"
    if rerun is not None:   # a script: fix needs a factory; running it again proves the edit
        return NextStep(action + "; then the census shows the site gone", rerun, DIFFERS.get(site.gb_id, "") if _fits(site) else "")
    spec = shlex.quote(target or "TARGET")
    # `fix --site` for a config flag, a wrapper on a function called from the compiled one
    # (the compiled entry itself is never wrapped), or a host-side call (its caller moves work
    # at any depth); any other break directly in the compiled function is an edit that a
    # census after it proves.
    if site.nesting_depth > 1 or fam in ("config", "print_hop") or book is HOST_BOOK:
        selector = f"{gb_text(site.gb_id)} {site.id.path}:{site.line}"
        command = f"graphstitch fix {spec} --site {shlex.quote(selector)}"
    else:
        command = f"graphstitch census {spec}"
        action += "; then the census shows the site gone"
    return NextStep(action, command, DIFFERS.get(site.gb_id, "") if _fits(site) else "")


def advise(census: Census, rerun: str | None = None) -> Census:
    """Fill ``Site.advice``, ``Site.next_step`` and ``RecompileCause.advice`` (every output
    shows them). RERUN: see next_step_for."""
    for s in census.sites:
        s.advice = advice_for(s)
        s.next_step = next_step_for(s, census.target, rerun)
    for r in census.recompiles:
        r.advice = cause_advice(r)
    return census
