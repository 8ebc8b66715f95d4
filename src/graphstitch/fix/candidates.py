"""What `graphstitch fix` can try for a break site without editing the user's source:
torch._dynamo.config flags for the run, and escape hatches wrapped at run time around the
function holding the break. No torch import."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..jsonio import to_json
from ..model import Site, StackEntry
from ..paths import in_project
from ..targets import Patches, Wrap
from .rules import Rewrite, is_scope_frame, user_frames

if TYPE_CHECKING:
    from .trials import Fix

# Least invasive first: how ranking breaks ties between verified candidates.
INVASIVENESS = {"config": 1, "nonstrict_trace": 2, "leaf_function": 3,
                "custom_op": 4, "allow_in_graph": 5, "disable": 6}
HATCH_KINDS = ("nonstrict_trace", "leaf_function", "custom_op", "allow_in_graph", "disable")
_FLAGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops", "trace_autograd_ops", "trace_numpy")
_HINTED_FLAG = re.compile(r"torch\._dynamo\.config\.(\w+)\s*=\s*True\b")
# Hinted flags that make Dynamo skip or silence what the code does instead of tracing it: a
# trial could pass where state it does not compare was dropped. Never proposed.
_DROPS_BEHAVIOUR = frozenset({"suppress_errors", "skip_fwd_side_effects_in_bwd_under_checkpoint"})
_LOG_METHODS = ("debug", "info", "warning", "error", "exception", "critical", "log")


# One line per candidate kind: what it costs (rewrites carry their own).
TRADEOFFS = {
    "config": "a torch._dynamo.config flag for the whole process, not just this site",
    "nonstrict_trace": "the function is not traced by Dynamo (AOT traces it); inputs/outputs must be tensors/constants",
    "leaf_function": "the function runs eagerly as an opaque op; its output shapes come from a fake",
    "custom_op": "an opaque custom op with a generated fake; the compiler cannot fuse into it",
    "allow_in_graph": "the body is traced at compile time: Python side effects may not run at run time",
    "disable": "the function runs eagerly (a graph boundary stays around the call)",
}


@dataclass
class Candidate:
    kind: str            # "config", a hatch name, or a rewrite strategy ("rewrite", "extract", "split")
    label: str
    patches: Patches
    rewrite: Rewrite | None = None   # a source patch, tried on a patched copy

    @property
    def key(self) -> str:
        if self.rewrite is not None:
            return json.dumps({"rule": self.rewrite.rule, "files": self.rewrite.files}, sort_keys=True)
        return json.dumps(to_json(self.patches), sort_keys=True)

    @property
    def strategy(self) -> str:
        if self.rewrite is not None:
            return self.rewrite.strategy
        return "config" if self.kind == "config" else "hatch"

    @property
    def tradeoff(self) -> str:
        return self.rewrite.tradeoff if self.rewrite is not None else TRADEOFFS.get(self.kind, "")


def candidates(site: Site, project_root: str | None) -> list[Candidate]:
    """What can be tried for this site without editing the user's source."""
    out: list[Candidate] = []
    text = " ".join([site.gb_type, site.explanation] + list(site.hints))
    flags = [f for f in _FLAGS if f in text or (f == "capture_scalar_outputs" and site.gb_id in ("GB0124", "GB0033"))
             or (f == "capture_dynamic_output_shape_ops" and site.gb_id == "GB0036")]
    # A flag Dynamo's own hint names ("Set torch._dynamo.config.allow_rnn=True to ..."): a
    # flag this torch does not have fails its trial with that reason.
    flags += [f for f in _HINTED_FLAG.findall(" ".join(site.hints)) if f not in flags and f not in _DROPS_BEHAVIOUR]
    for flag in flags:
        out.append(Candidate("config", f"config {flag}=True", Patches(config={flag: True})))
    code = site.code or ""
    if re.search(r"\bprint\s*\(", code):
        out.append(Candidate("config", "config reorderable_logging_functions={print}",
                             Patches(config={"reorderable_logging_functions": ["builtins.print"]})))
    if re.search(r"\bwarnings\.warn\s*\(", code):
        # Deferred to after the graph: the warning is still raised at run time (checked:
        # warnings are in the side-effect check), only later than the tensor code before it.
        out.append(Candidate("config", "config reorderable_logging_functions={warnings.warn}",
                             Patches(config={"reorderable_logging_functions": ["warnings.warn"]})))
    if site.gb_id == "GB0291" or re.search(r"\b(log|logger|logging)\.\w+\(", code):
        used = [m for m in _LOG_METHODS if re.search(rf"\.{m}\(", code)] or list(_LOG_METHODS)
        out.append(Candidate("config", "config ignore_logging_functions={" + ", ".join(f"Logger.{m}" for m in used) + "}",
                             Patches(config={"ignore_logging_functions": [f"logging.Logger.{m}" for m in used]})))
    # Wrappers go on the function holding the break (a library one is wrapped from the
    # user's side), and on the innermost project function that calls into it; never on the
    # compiled entry itself (wrapping that just stops compiling it). nested_graph_breaks
    # is not tried: it merges reports of a break, it never removes one.
    effects = re.search(r"\bprint\s*\(|\blog", code) is not None
    for fr in _wrap_targets(site, project_root):
        for how in HATCH_KINDS:
            if how == "allow_in_graph" and not effects:
                continue  # only tried where it matters: it drops run-time side effects
            out.append(Candidate(how, f"{how} on {fr.function}()",
                                 Patches(wrap=Wrap(fr.file, fr.line, fr.function, how))))
    return out


DATA_FLAGS = ("capture_dynamic_output_shape_ops", "capture_scalar_outputs")


def flags_together(site: Site, tried: list[Fix]) -> Candidate | None:
    """Both data-dependence flags at once, when one of them alone removed SITE but the break
    only moved (a value read from data that then sizes an op: ``.nonzero()`` then ``.item()``
    in an MoE routing loop): together they may trace the whole of it."""
    for f in tried:
        flags = set(f.patches.config) if f.kind == "config" else set()
        moved_only = f.why_not and all(w.startswith(("moved, not removed", "new skipped frame")) for w in f.why_not)
        if f.site == site.id and len(flags) == 1 and flags <= set(DATA_FLAGS) and f.site_gone and moved_only:
            return both_data_flags()
    return None


def both_data_flags() -> Candidate:
    return Candidate("config", "config " + " + ".join(f"{x}=True" for x in DATA_FLAGS),
                     Patches(config=dict.fromkeys(DATA_FLAGS, True)))


def _wrap_targets(site: Site, root: str | None) -> list[StackEntry]:
    """Frames whose function a wrapper may go on: the site's own, plus the innermost frame
    inside the project when the site is in a library. Only frames below the compiled entry
    count (its depth is the site's nesting_depth); the entry itself is never wrapped."""
    frames = user_frames(site)
    inner = frames[len(frames) - site.nesting_depth + 1:] if site.nesting_depth > 1 else []
    # A comprehension's or lambda's own frame cannot be wrapped: its function holds the site.
    inner = [fr for fr in inner if os.path.isfile(fr.file) and fr.function not in ("?", "<module>")
             and not is_scope_frame(fr.function)]
    if not inner:
        return []
    out = [inner[-1]]
    if not in_project(inner[-1].file, root):
        mine = [fr for fr in inner if in_project(fr.file, root)]
        if mine:
            out.append(mine[-1])
    return out
