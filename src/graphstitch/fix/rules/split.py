"""Strategy 3 of PyTorch's graph-break docs, the region split: what cannot be compiled runs
eagerly *between* compiled parts, explicitly, instead of as a graph break. A module's
``forward`` becomes eager glue; the statements before and after the break compile as their
own frames. The split that is left is an eager gap with no break event."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from ...model import Site, StackEntry
from ...paths import in_project, is_torch_file_path
from .base import Ctx, Refusal, Rewrite, entry_frame, is_scope_frame, rule, user_frames
from .syntax import Index, add_import, bound, reads, small, swap_code, swap_in, walk, walk_no_defs


@rule("region-split")
def _region_split(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """Strategy 3, the docs' g/h restructure: the compiled entry (a module's ``forward``, or
    a method the user compiles) becomes eager glue under ``torch.compiler.disable(recursive=False)``; the statements
    before the break and after it move into methods Dynamo compiles as their own frames, and
    the break's statements into a ``torch.compiler.disable`` method between them. The eager
    gap stays, now explicit, with no break event. Top-level statements that hold other sites
    of the same entry form gaps too (they would break in a compiled part); a gap holding a
    loop is also offered in place (the loop in the glue, each step's calls compiled).

    The entry is the frame Dynamo was compiling at the break; when that is a function its
    caller ran eagerly (after an earlier break), the outermost frame, the function the user
    compiled, is split instead when the first gives no patch."""
    entry = entry_frame(ctx.site)
    frames = user_frames(ctx.site)
    first = list(_split_at(ctx, entry)) if entry is not None else []
    yield from first
    if frames and frames[0] != entry and not any(isinstance(r, Rewrite) for r in first):
        yield from _split_at(ctx, frames[0])
    # A break in a method the compiled forward calls (at any depth): the frames from the
    # entry down to it run as glue under disable(recursive=False), so what they call still
    # compiles, and that method splits: the entry's other work is not made eager with it.
    # (a stack shorter than the nesting depth starts below the entry: from its first frame)
    top = frames.index(entry) if entry in frames else 0
    chain = [fr for fr in frames[top:] if not is_scope_frame(fr.function)]
    if len(chain) >= 2 and chain[0].function == "forward":
        yield from _split_at(ctx, chain[-1], chain[:-1])


def _split_at(ctx: Ctx, entry: StackEntry, chain: Sequence[StackEntry] = ()) -> Iterator[Rewrite | Refusal]:
    """The split of the function of frame ENTRY; with CHAIN (the frames that call it, from
    the compiled entry down), a method split in place, its callers made eager glue."""
    site, sites = ctx.site, ctx.sites
    if chain and not all(in_project(fr.file, ctx.root) and os.path.isfile(fr.file) for fr in chain):
        return
    if not in_project(entry.file, ctx.root) or not os.path.isfile(entry.file):
        return
    try:
        idx = ctx.idx if entry.file == ctx.path else _parse(entry.file, ctx.read)
    except (cst.ParserSyntaxError, SyntaxError, OSError):
        return
    func = _def_at(idx, entry)
    frames = user_frames(site)
    nxt = frames[frames.index(entry) + 1] if entry.function != "forward" and entry in frames[:-1] and not chain \
        else None
    if nxt is not None and nxt.function == "forward" and nxt.file == entry.file:
        # The compiled frame is a decorator's wrapper around a module's forward (a library's
        # `@can_return_tuple`): the forward is what splits.
        wrapped = _def_at(idx, nxt)
        if wrapped is not None and wrapped.decorators:
            entry, func = nxt, wrapped
    if func is None or not isinstance(func.body, cst.IndentedBlock):
        return
    cls = idx.parents.get(idx.parents.get(func, func), None)
    fn_entry: cst.FunctionDef | None = None     # a function entry: split into a module the caller compiles
    unbound = False
    modes: list[cst.BaseExpression] = []        # its grad-mode decorators, a `with` in the glue
    if chain:
        if not isinstance(cls, cst.ClassDef) or func.decorators or not func.params.params:
            return
    elif isinstance(cls, cst.ClassDef):
        # a method entry (`torch.compile(decoder.inference)`): split in its class like forward
        if not func.params.params or any(isinstance(d.decorator, cst.Name) and d.decorator.value in
                                         ("staticmethod", "classmethod", "property") for d in func.decorators):
            return
        # the factory passes the method unbound (`Cls.method`), the function the user compiles
        unbound = bool(ctx.factory and ctx.target_file and frames and frames[0] == entry
                       and _factory_loads(ctx, cls.name.value, func.name.value))
    else:
        if not isinstance(idx.parents.get(func), cst.Module) or not ctx.factory or not ctx.target_file \
                or not all(_grad_mode(d.decorator) for d in func.decorators):
            return
        # `@torch.inference_mode()` and the like: the glue runs its body in that context, so
        # the parts it calls compile under it as before.
        modes = [d.decorator for d in func.decorators]
        # torch.compile(fn) traces through a disable() on fn itself: the split belongs at the
        # torch.compile call. The parts go into a module whose forward is the eager glue, and
        # the factory (the caller) compiles that module instead of the function.
        fn_entry = func
        cls_name = _fresh_name(idx, "_" + "".join(w.capitalize() for w in func.name.value.split("_") if w) + "Split")
        synth = cst.parse_statement(f"class {cls_name}(torch.nn.Module):\n    def forward(self):\n        pass\n")
        assert isinstance(synth, cst.ClassDef) and isinstance(synth.body, cst.IndentedBlock)
        fwd = synth.body.body[0]
        assert isinstance(fwd, cst.FunctionDef)
        func = fwd.with_changes(params=func.params.with_changes(params=[cst.Param(cst.Name("self")),
                                                                        *func.params.params]), body=func.body)
        cls = synth.with_changes(body=synth.body.with_changes(body=[func]))
    body: list[cst.BaseStatement] = [st for st in func.body.body if isinstance(st, cst.BaseStatement)]
    # Every site whose stack passes through this function joins the gap: it would break in a
    # compiled part (a comprehension's site has its own frame above the entry's).
    lines = {fr.line for s in sites for fr in user_frames(s)
             if fr.file == entry.file and fr.function == entry.function} | {entry.line}
    fp = func.params
    stars = [a for a in (fp.star_arg, fp.star_kwarg) if isinstance(a, cst.Param)]
    # every parameter by name (a *args tuple or **kwargs dict is passed on as one value)
    params = [p.name.value for p in [*fp.posonly_params, *fp.params, *stars, *fp.kwonly_params]]
    # A site is reported once, with the stack of its first report: the function it passes
    # through, called again from this body (an epoch driver run to train, then to evaluate),
    # or called by another function this file defines (`trainer.val` -> `self.run_epoch`),
    # breaks there too.
    reached = {fs[k].function for s in sites for fs in [user_frames(s)] for i, fr in enumerate(fs[:-1])
             if fr.file == entry.file and fr.function == entry.function for k in range(i + 1, len(fs))
             if not is_scope_frame(fs[k].function)} - _DISPATCH
    defs: dict[str, list[cst.FunctionDef]] = {}
    for d in walk(idx.module):
        if isinstance(d, cst.FunctionDef):
            defs.setdefault(d.name.value, []).append(d)
    # A statement a trial of this split broke in (an object the gap made, used where it cannot
    # be: a scheduler built from the gap's optimizer, a part returning what Dynamo cannot
    # rebuild) joins the gap too, when the split is proposed again (``ctx.gap_code``).
    text = idx.module.code.splitlines()
    # (Not an early return: it stays in the glue, and a frame of the glue's call to a part
    # names the glue's own lines.)
    grown = [bool(ctx.gap_code) and not _returns(st) and
             any(ln.strip() in ctx.gap_code for ln in text[idx.pos[st] - 1:idx.end[st]]) for st in body]
    holds = [g or any(idx.contains(st, ln) for ln in lines) or
             any(c in reached or any(_called(d) & reached for d in defs.get(c, ())) for c in _called(st))
             for st, g in zip(body, grown)]
    runs = _eager_runs(body, holds)
    if not runs:
        return
    # `global args, writer`: a part that assigns such a name declares it too (else it binds a
    # local and the module keeps the old value: pytorch-cifar100's loaders stayed None), and
    # the name is never passed or returned (a parameter cannot be declared global).
    scoped: dict[type, set[str]] = {cst.Global: set(), cst.Nonlocal: set()}
    for st in body:
        for n in walk_no_defs(st):
            if isinstance(n, (cst.Global, cst.Nonlocal)):
                scoped[type(n)] |= {item.name.value for item in n.names}
    declared = scoped[cst.Global]

    def declare(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        have = {item.name.value for st in stmts for n in walk_no_defs(st) if isinstance(n, cst.Global)
                for item in n.names}
        mine = sorted((bound(stmts) & declared) - have)
        return [cst.parse_statement(f"global {', '.join(mine)}\n"), *stmts] if mine else stmts

    def build(runs: list[tuple[int, int]], inline: bool = False,
              below: dict[str, tuple[Index, dict[cst.CSTNode, object]]] | None = None) -> Rewrite | Refusal:
        """The split with eager gaps RUNS; INLINE: the gaps stay in the glue itself (a loop
        stays in Python and what it calls compiles, one step at a time). BELOW: the defs of
        the functions the gaps call that become glue too (per file, from ``_glue_chain``)."""
        # the body as alternating parts: compiled (False) and eager gaps (True)
        parts: list[tuple[bool, list[cst.BaseStatement]]] = []
        pos = 0
        for k, j in runs:
            if pos < k:
                parts.append((False, body[pos:k]))
            parts.append((True, body[k:j + 1]))
            pos = j + 1
        if pos < len(body):
            parts.append((False, body[pos:]))
        # A compiled part's statement that returns early (`if len(memory) < batch: return 0.0`)
        # stays in the glue, where its return returns from the function; the statements
        # around it compile as parts of their own.
        guards: set[int] = set()     # the parts kept in the glue as they are
        cut: list[tuple[bool, list[cst.BaseStatement]]] = []
        for i, (eager, stmts) in enumerate(parts):
            if eager or i == len(parts) - 1 or not any(_returns(st) for st in stmts):
                cut.append((eager, stmts))
                continue
            run: list[cst.BaseStatement] = []
            for st in stmts:
                if _returns(st):
                    cut += [(False, run)] if run else []
                    guards.add(len(cut))
                    cut.append((True, [st]))
                    run = []
                else:
                    run.append(st)
            cut += [(False, run)] if run else []
        parts = cut
        if any(_yields(st) for st in body):
            return Refusal("region-split", "the function yields (a generator); it cannot be split")
        if any(_returns(st) for i, (eager, stmts) in enumerate(parts[:-1]) if not (eager and inline) and i not in guards
               for st in stmts):
            return Refusal("region-split", "a statement before the last part returns; forward cannot be split there")
        if scoped[cst.Nonlocal]:
            return Refusal("region-split", f"the function declares `nonlocal {', '.join(sorted(scoped[cst.Nonlocal]))}`"
                           ": a part moved out of it cannot rebind that name")
        # A loop kept in the glue compiles what it calls: a module or function it was given
        # (`model(idx)`, `self.decoder(h)`) or one this file defines.
        if not any(_computes(stmts) for eager, stmts in parts if not eager) and \
                not (inline and _calls_out(idx, [st for eager, stmts in parts if eager for st in stmts], params)):
            return Refusal("region-split", "nothing before, between or after the breaks computes: the whole forward "
                           "would run eagerly")
        self_name = params[0]
        taken = {n.name.value for n in cls.body.body if isinstance(n, cst.FunctionDef)}

        prefix = "_forward_" if func.name.value == "forward" else f"_{func.name.value.strip('_')}_"

        def method(stem: str) -> str:
            name, n = f"{prefix}{stem}", 2
            while name in taken:
                name, n = f"{prefix}{stem}{n}", n + 1
            return name

        def order(names: set[str], stmts: list[cst.BaseStatement]) -> list[str]:
            """forward's parameters in signature order, then locals as they first appear."""
            seen = [n.value for st in stmts for n in walk(st) if isinstance(n, cst.Name)]
            mine = [n for n in dict.fromkeys(seen) if n in names and n != self_name]
            return sorted(mine, key=lambda n: (params.index(n) if n in params else len(params) + mine.index(n)))

        def helper(name: str, ins: list[str], stmts: list[cst.BaseStatement], outs: list[str] | None,
                   deco: str | None) -> cst.FunctionDef:
            ret = [] if outs is None or not outs else [cst.parse_statement(f"return {', '.join(outs)}\n")]
            first = stmts[0].with_changes(leading_lines=[]) if stmts else None
            fn = cst.parse_statement(f"def {name}({', '.join([self_name, *ins])}):\n    pass\n")
            assert isinstance(fn, cst.FunctionDef)
            decorators = [cst.Decorator(cst.parse_expression(deco))] if deco else []
            return fn.with_changes(body=cst.IndentedBlock(body=[first, *stmts[1:], *ret] if first else ret),
                                   decorators=decorators, leading_lines=[cst.EmptyLine(indent=False)])

        glue: list[cst.BaseStatement] = []
        new_methods: list[cst.FunctionDef] = []
        avail = set(params)     # the names the glue holds so far
        for i, (eager, stmts) in enumerate(parts):
            last = i == len(parts) - 1
            if last and not eager and not _computes(stmts) or eager and inline or i in guards:
                # `return loss`, an early return, or a gap kept in place: in the glue
                kept = [new for st in stmts if isinstance(new := swap_in(st, _eager_calls(idx, entry.file, st, sites)),
                                                          cst.BaseStatement)]
                glue += [st.with_changes(leading_lines=[]) if isinstance(st, cst.SimpleStatementLine) else st
                         for st in kept]
                avail |= bound(stmts)
                continue
            name = method("eager" if eager else "before" if i == 0 else "after" if last else "between")
            # the last part returns what the function returns (None when it falls off the end)
            outs = [] if last else order((bound(stmts) - declared) & reads([st for _, ss in parts[i + 1:] for st in ss],
                                                                            idx.parents), stmts)
            # A name bound on some paths only (`if logprobs: scores = ...`): its value so far is
            # passed in, or it starts as None (read unbound, the original would have raised).
            maybe = [n for n in outs if n not in _surely_bound(stmts)]
            free = _free_loads(idx, stmts)
            ins = [n for n in order(avail - declared, stmts) if n in free]
            for n in maybe:
                if n in avail and n not in ins:
                    ins.append(n)
            unset = [cst.parse_statement(f"{n} = None  # graphstitch fix: bound on some paths only\n")
                     for n in maybe if n not in avail]
            hatch = "torch.compiler.disable  # graphstitch fix: runs eagerly, between the compiled parts" \
                if eager else None
            new_methods.append(helper(name, ins, declare([*unset, *stmts]), None if last else outs, hatch))
            head = "return " if last else (f"{', '.join(outs)} = " if outs else "")
            glue.append(cst.parse_statement(f"{head}{self_name}.{name}({', '.join(ins)})\n"))
            taken.add(name)
            avail |= bound(stmts)
        deco = cst.Decorator(cst.parse_expression("torch.compiler.disable(recursive=False)"),
                             trailing_whitespace=cst.TrailingWhitespace(
                                 whitespace=cst.SimpleWhitespace("  "),
                                 comment=cst.Comment("# graphstitch fix: region split, these lines run eagerly")))
        # A decorated forward (a library's `@can_return_tuple`): the decorator's wrapper is the
        # frame Dynamo compiles and would break at the call to the glue, so it runs eagerly too,
        # without recursion: the glue under it, and the parts it calls still compile.
        outer = [cst.Decorator(cst.parse_expression("torch.compiler.disable(recursive=False)"))] \
            if func.decorators and fn_entry is None else []
        if modes:
            glue = [cst.With(items=[cst.WithItem(m, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                                    for m in modes[:-1]] + [cst.WithItem(modes[-1])],
                             body=cst.IndentedBlock(body=glue),
                             leading_lines=[])]
        new_func = func.with_changes(decorators=[*outer, *func.decorators, deco] if outer else [deco],
                                     body=func.body.with_changes(body=declare(glue)))
        spans = [f"{idx.pos[body[k]]}" + (f"–{idx.end[body[j]]}" if idx.end[body[j]] > idx.pos[body[k]] else "")
                 for k, j in runs]
        gap_lines = ("line " if len(spans) == 1 else "lines ") + ", ".join(spans) + \
            (" eagerly in place" if below else
             " eagerly in place (its loop stays in Python, what the loop calls compiles)" if inline else " eagerly")
        if chain:
            glued = _glue_chain(idx, entry.file, func, chain, ctx.read, sites)
            if isinstance(glued, Refusal):
                return glued
            code = swap_code(idx.module, {func: cst.FlattenSentinel([new_func, *new_methods]),
                                          **glued.pop(entry.file, (idx, {}))[1]})
            return Rewrite("region-split", "split",
                           f"region split: {cls.name.value}.{func.name.value} runs {gap_lines}, the rest "
                           f"compiles in separate methods; its callers {', '.join(fr.function for fr in chain)} run as "
                           "eager glue",
                           "the eager gap stays, explicit; the callers' own tensor code runs eagerly (what they call "
                           "compiles)",
                           {entry.file: add_import(code, "import torch"),
                            **{f: add_import(swap_code(fidx.module, sw), "import torch")
                               for f, (fidx, sw) in glued.items()}})
        if fn_entry is None:
            label = f"region split: {cls.name.value}.{func.name.value} runs {gap_lines}, the rest compiles " \
                "in separate methods"
            if unbound:
                # torch.compile(Cls.method) traces the method's own frame, disable(recursive=False)
                # or not (a bound method's is honoured): the factory compiles a module whose
                # eager forward calls the method instead, so the glue runs below a compiled entry.
                entry_cls = _fresh_name(idx, f"_{cls.name.value}{func.name.value.title().replace('_', '')}Entry")
                deleg = cst.parse_statement(
                    f"\n\nclass {entry_cls}(torch.nn.Module):  # graphstitch fix: compile this, not "
                    f"{cls.name.value}.{func.name.value}\n"
                    "    @torch.compiler.disable(recursive=False)\n"
                    f"    def forward(self, *args, **kwargs):\n"
                    f"        return {cls.name.value}.{func.name.value}(*args, **kwargs)\n")
                code = add_import(swap_code(idx.module, {func: cst.FlattenSentinel([new_func, *new_methods]),
                                                         cls: lambda new: cst.FlattenSentinel([new, deleg])}), "import torch")
                files = _caller_compiles(ctx, entry.file, {entry.file: code}, cls.name.value, entry_cls,
                                         attr=func.name.value)
                if isinstance(files, Refusal):
                    return files
                return Rewrite("entry-split", "caller", f"{label}; the factory compiles {entry_cls}, a module "
                               f"calling it, instead of {cls.name.value}.{func.name.value}",
                               "the eager gap stays, explicit; your own code compiles a module calling the method "
                               "instead of the method (torch.compile of an unbound method traces its glue)", files)
            code = swap_code(idx.module, {func: cst.FlattenSentinel([new_func, *new_methods])})
            return Rewrite("region-split", "split", label,
                           "the eager gap stays, explicit: no break event, one graph per compiled part",
                           {entry.file: add_import(code, "import torch")})
        new_cls = cls.with_changes(body=cls.body.with_changes(body=[new_func, *new_methods]),
                                   leading_lines=[cst.EmptyLine(indent=False)] * 2)
        others = dict(below or {})
        code = add_import(swap_code(idx.module, {fn_entry: cst.FlattenSentinel([fn_entry, new_cls]),
                                                 **others.pop(entry.file, (idx, {}))[1]}), "import torch")
        # the glued functions' files first: one may be the factory's, whose redirect goes on top
        files = _caller_compiles(ctx, entry.file, {
            **{f: add_import(swap_code(fidx.module, sw), "import torch") for f, (fidx, sw) in others.items()},
            entry.file: code}, fn_entry.name.value, cls.name.value)
        if isinstance(files, Refusal):
            return files
        if below:
            names = ", ".join(f"{d.name.value}()" for _, sw in below.values() for d in sw if isinstance(d, cst.FunctionDef))
            return Rewrite("entry-split", "caller",
                           f"region split: {fn_entry.name.value}() runs {gap_lines}, and {names} as eager glue; the "
                           f"factory compiles {cls.name.value}, a module of its parts, instead",
                           "the functions holding the breaks run as eager glue (what they call compiles, one call at "
                           "a time); your own code compiles the module instead of the function", files)
        # Strategy 3 at a function entry changes the caller: it compiles the module of the
        # parts instead of the function. Issue 19 files this under caller-side moves.
        return Rewrite("entry-split", "caller",
                       f"region split: {fn_entry.name.value}() runs {gap_lines}; the factory compiles "
                       f"{cls.name.value}, a module of its parts, instead",
                       "the eager gap stays, explicit; your own code compiles the module instead of the function "
                       "(the split belongs at your torch.compile call)", files)

    first = build(runs)
    yield first
    # The statement after a gap reads what the gap made (a PackedSequence, numpy arrays): it
    # may break in a compiled part too, so gaps one statement longer are tried as well.
    longer = [(k, j + 1) if j + 1 < len(body) and not holds[j + 1]
              and bound(body[k:j + 1]) & reads([body[j + 1]], idx.parents) else (k, j) for k, j in runs]
    if isinstance(first, Rewrite) and longer != runs and longer[-1][1] + 1 < len(body):
        second = build(_eager_runs(body, [any(k <= i <= j for k, j in longer) for i in range(len(body))]))
        if isinstance(second, Rewrite):
            yield second
    # A gap that is a loop (a generation loop's stop test), or holds one (a training loop inside
    # `with tqdm(...)`): the loop stays in the glue, so each step's calls compile as their own
    # frames and the host code runs between them.
    if any(isinstance(n, (cst.For, cst.While)) for k, j in runs for st in body[k:j + 1] for n in walk_no_defs(st)):
        looped = build(runs, inline=True)
        if isinstance(looped, Rewrite):
            yield looped
    # Sites reached through a call this function makes (a helper that breaks) joined the gap,
    # so they would not break in a compiled part; but each may have a fix of its own. The gap
    # of this site's own statements alone is tried too: the others break where they do today
    # (a seed set at the top of the entry, before a call into code that breaks elsewhere).
    own = {fr.line for fr in user_frames(site) if fr.file == entry.file and fr.function == entry.function} \
        | {entry.line}
    alone = _eager_runs(body, [g or any(idx.contains(st, ln) for ln in own) for st, g in zip(body, grown)])
    # (A site that breaks in this function's own frame stays in the gap: it would break here.)
    direct = any(s.id != site.id and (fr := user_frames(s)) and (fr[-1].file, fr[-1].function) ==
                 (entry.file, entry.function) for s in sites)
    if alone and alone != runs and not chain and not direct:
        only = build(alone)
        if isinstance(only, Rewrite):
            yield only
    # A function entry whose gap calls the functions holding the site (an epoch function
    # calling `train`, whose loop breaks): the call stays in the glue and those functions
    # become glue too (disable(recursive=False)), so what they call compiles one call at a
    # time; the gap alone would run them, and all they call, eagerly.
    below = [fr for fr in frames[frames.index(entry) + 1:] if not is_scope_frame(fr.function)] \
        if fn_entry is not None and entry in frames else []
    if below and all(in_project(fr.file, ctx.root) and os.path.isfile(fr.file) for fr in below):
        glued = _glue_chain(idx, entry.file, fn_entry, below, ctx.read, sites) if fn_entry is not None else None
        if glued is not None and not isinstance(glued, Refusal):
            deep = build(runs, inline=True, below=glued)
            if isinstance(deep, Rewrite):
                yield deep


def _parse(path: str, read: Callable[[str], str]) -> Index:
    return Index(MetadataWrapper(cst.parse_module(read(path))))


def _glue_chain(idx: Index, path: str, func: cst.FunctionDef, chain: Sequence[StackEntry],
                read: Callable[[str], str], sites: Sequence[Site]
                ) -> dict[str, tuple[Index, dict[cst.CSTNode, object]]] | Refusal:
    """Per file, its syntax and the defs of CHAIN's frames there with
    ``disable(recursive=False)`` added (PATH, the file FUNC is in, is IDX), and the calls of
    SITES in them that would break again made eager (``_eager_calls``)."""
    out: dict[str, tuple[Index, dict[cst.CSTNode, object]]] = {}
    for fr in chain:
        try:
            fidx = idx if fr.file == path else out[fr.file][0] if fr.file in out else _parse(fr.file, read)
        except (cst.ParserSyntaxError, SyntaxError, OSError):
            return Refusal("region-split", f"{fr.file} does not parse")
        d = _def_at(fidx, fr)
        if d is None or d is func or (fr.file == path and (idx.contains(d, idx.pos[func]) or
                                                             idx.contains(func, fidx.pos[d]))):
            return Refusal("region-split", f"{fr.function}() at {fr.file}:{fr.line} is not a def apart from the "
                           "split method")
        glue = cst.Decorator(cst.parse_expression("torch.compiler.disable(recursive=False)"),
                             trailing_whitespace=cst.TrailingWhitespace(
                                 whitespace=cst.SimpleWhitespace("  "),
                                 comment=cst.Comment("# graphstitch fix: eager glue, what it calls compiles")))
        # A decorated def: its wrapper is the frame Dynamo sees, so it is glue too. A
        # staticmethod/classmethod stays outermost: a wrapper above it is bound like a method.
        top = 0
        while top < len(d.decorators) and _is_binding(d.decorators[top].decorator):
            top += 1
        rest = d.decorators[top:]
        decos = [*d.decorators[:top], glue, *rest, glue.with_changes(trailing_whitespace=cst.TrailingWhitespace())] \
            if rest else [*d.decorators[:top], glue]
        d_eager = swap_in(d, _eager_calls(fidx, fr.file, d, sites))
        assert isinstance(d_eager, cst.FunctionDef)
        out.setdefault(fr.file, (fidx, {}))[1][d] = d_eager.with_changes(decorators=decos)
    return out


def _eager_calls(idx: Index, path: str, node: cst.CSTNode, sites: Sequence[Site]) -> dict[cst.CSTNode, object]:
    """Swaps that run eagerly, under ``torch.compiler.disable``, the call of each site in
    NODE (eager glue) whose break is inside torch's own code below it (an optimizer's step:
    a `graph_break()` in its wrapper): what glue calls still compiles, and that call would
    break again there. One call per site: the outermost of its statement."""
    out: dict[cst.CSTNode, object] = {}
    for s in sites:
        if not s.stack or not is_torch_file_path(s.stack[-1].file) or \
                os.path.realpath(s.file) != os.path.realpath(path) or not idx.contains(node, s.line):
            continue
        st = idx.statement_at(s.line)
        parts = small(st) if st is not None else []
        call = getattr(parts[0], "value", None) if len(parts) == 1 else None
        if isinstance(call, cst.Call) and call not in out:
            out[call] = call.with_changes(func=cst.Call(cst.parse_expression("torch.compiler.disable"),
                                                        [cst.Arg(call.func)]))
    return out


def _is_binding(deco: cst.BaseExpression) -> bool:
    return isinstance(deco, cst.Name) and deco.value in ("staticmethod", "classmethod")


# A module's call dispatch: every module has one, so the name says nothing of what is called.
_DISPATCH = {"forward", "__call__", "_call_impl", "_wrapped_call_impl"}


def _called(node: cst.CSTNode) -> set[str]:
    """The names NODE calls: ``f(...)`` and ``obj.f(...)`` both call ``f``."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, cst.Call):
            if isinstance(n.func, cst.Name):
                out.add(n.func.value)
            elif isinstance(n.func, cst.Attribute):
                out.add(n.func.attr.value)
    return out


def _eager_runs(body: Sequence[cst.BaseStatement], holds: Sequence[bool]) -> list[tuple[int, int]]:
    """The gaps: runs of the statements that hold sites (first, last index); two runs with
    nothing that computes between them are one (a `global`, a constant)."""
    runs: list[tuple[int, int]] = []
    for i, h in enumerate(holds):
        if not h:
            continue
        if runs and not _computes(body[runs[-1][1] + 1:i]):
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


# torch's grad-mode and autocast decorators: context managers a function can be decorated with
_GRAD_MODES = {"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "autocast"}


def _grad_mode(deco: cst.BaseExpression) -> bool:
    """DECO is ``@torch.no_grad()`` (``torch.inference_mode()``, ``torch.amp.autocast(...)``…): a
    call of torch's context manager, which a ``with`` around the body can stand for."""
    if not isinstance(deco, cst.Call) or not isinstance(deco.func, cst.Attribute):
        return False
    root: cst.BaseExpression = deco.func
    while isinstance(root, cst.Attribute):
        root = root.value
    return deco.func.attr.value in _GRAD_MODES and isinstance(root, cst.Name) and root.value == "torch"


def _fresh_name(idx: Index, name: str) -> str:
    """NAME, with underscores added until no name of the module is spelled so."""
    taken = {n.value for n in walk(idx.module) if isinstance(n, cst.Name)}
    while name in taken:
        name += "_"
    return name


def _factory_def(ctx: Ctx, text: str | None = None) -> tuple[cst.Module, cst.FunctionDef | None]:
    assert ctx.target_file is not None
    mod = cst.parse_module(text if text is not None else ctx.read(ctx.target_file))
    return mod, next((n for n in mod.body if isinstance(n, cst.FunctionDef) and n.name.value == ctx.factory), None)


def _factory_loads(ctx: Ctx, fn: str, attr: str | None = None) -> list[cst.CSTNode]:
    """The factory's reads of FN (of ``FN.ATTR`` with ATTR), on disk."""
    try:
        _, fac = _factory_def(ctx)
    except (cst.ParserSyntaxError, OSError):
        return []
    return _loads(fac, fn, attr) if fac is not None else []


def _caller_compiles(ctx: Ctx, path: str, written: dict[str, str], fn: str, cls: str,
                     attr: str | None = None) -> dict[str, str] | Refusal:
    """The factory (the caller) made to return an instance of CLS where it returned the
    function FN (with ATTR: the method ``FN.ATTR``) defined in PATH: the WRITTEN files, with the
    factory's file (as written, or as on disk) changed so (its ``from ... import FN`` imports
    CLS too)."""
    assert ctx.target_file is not None and ctx.factory is not None
    tf = ctx.target_file
    files = dict(written)
    mod, fac = _factory_def(ctx, files.get(tf))
    if fac is None:
        return Refusal("region-split", f"the factory {ctx.factory}() is not a module-level function of {tf}")
    swaps: dict[cst.CSTNode, object] = {n: cst.parse_expression(f"{cls}()") for n in _loads(fac, fn, attr)}
    if not swaps:
        return Refusal("region-split", f"the factory {ctx.factory}() does not pass {fn} itself")
    if tf != path:
        imp = next((n for st in mod.body for n in walk(st) if isinstance(n, cst.ImportFrom)
                    and not isinstance(n.names, cst.ImportStar)
                    and any(isinstance(a.name, cst.Name) and a.name.value == fn and a.asname is None for a in n.names)),
                   None)
        if imp is None or isinstance(imp.names, cst.ImportStar):
            return Refusal("region-split", f"the factory's file does not import {fn} by name; it cannot be pointed "
                           f"at {cls}")
        swaps[imp] = imp.with_changes(names=[*imp.names, cst.ImportAlias(cst.Name(cls))])
    files[tf] = swap_code(mod, swaps)
    return files


def _loads(fac: cst.FunctionDef, name: str, attr: str | None = None) -> list[cst.CSTNode]:
    """The reads of NAME in the factory's body (not attribute names, keywords or targets);
    with ATTR, of ``NAME.ATTR``."""
    out: list[cst.CSTNode] = []
    for st in fac.body.body:
        stack: list[cst.CSTNode] = [st]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Attribute):
                if attr is not None and n.attr.value == attr and isinstance(n.value, cst.Name) \
                        and n.value.value == name:
                    out.append(n)
                stack.append(n.value)
                continue
            if isinstance(n, cst.Arg):
                stack.append(n.value)
                continue
            if isinstance(n, (cst.AssignTarget, cst.FunctionDef, cst.Lambda)):
                continue
            if attr is None and isinstance(n, cst.Name) and n.value == name:
                out.append(n)
            stack.extend(n.children)
    return out


def _def_at(idx: Index, frame: StackEntry) -> cst.FunctionDef | None:
    """The def of FRAME's function: named so, starting at or above its line, holding it."""
    return next((n for n, ln in idx.pos.items() if isinstance(n, cst.FunctionDef) and n.name.value == frame.function
                 and ln <= frame.line and isinstance(n.body, cst.IndentedBlock) and idx.contains(n, frame.line)), None)


def _returns(st: cst.CSTNode) -> bool:
    return any(isinstance(n, (cst.Return, cst.Yield)) for n in walk_no_defs(st))


def _free_loads(idx: Index, stmts: Sequence[cst.BaseStatement], sure: frozenset[str] = frozenset()) -> set[str]:
    """Names STMTS read before they surely bind them: what a part takes as arguments (a name
    it binds first, `probs = None`, is not passed: it may be unbound in the caller). A block
    sees what its enclosing blocks bound before it, a loop's body its target too."""
    out: set[str] = set()
    known = set(sure)
    for st in stmts:
        blocks: list[cst.IndentedBlock] = []
        stack: list[cst.CSTNode] = list(st.children)
        while stack:
            n = stack.pop()
            if isinstance(n, cst.IndentedBlock):
                blocks.append(n)
            elif isinstance(n, cst.Name):
                if n in idx.loads and n.value not in known:
                    out.add(n.value)
            else:
                if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value not in known:
                    out.add(n.target.value)     # `x += 1` reads x
                stack.extend(n.children)
        # a loop's target, a `with`'s `as` names: bound before the block runs
        heads = [st.target] if isinstance(st, cst.For) else \
            [it.asname.name for it in st.items if it.asname is not None] if isinstance(st, cst.With) else []
        inner = frozenset(known | {n.value for h in heads for n in walk(h) if isinstance(n, cst.Name)})
        for blk in blocks:
            out |= _free_loads(idx, [b for b in blk.body if isinstance(b, cst.BaseStatement)], inner)
        known |= _surely_bound([st])
    return out


def _surely_bound(stmts: Sequence[cst.BaseStatement]) -> set[str]:
    """Names bound on every path through STMTS: by their own top-level assignments, imports,
    ``def``s and ``class``es and ``with`` bodies (not inside an ``if``, loop or ``try``)."""
    out: set[str] = set()
    for st in stmts:
        if isinstance(st, (cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef)):
            out |= bound([st])
        elif isinstance(st, cst.With) and isinstance(st.body, cst.IndentedBlock):
            out |= _surely_bound([b for b in st.body.body if isinstance(b, cst.BaseStatement)])
            out |= bound([it.asname for it in st.items if it.asname is not None])
    return out


def _yields(st: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Yield) for n in walk_no_defs(st))


def _calls_out(idx: Index, stmts: Sequence[cst.BaseStatement], params: Sequence[str]) -> bool:
    """STMTS call a parameter (``model(x)``), an attribute of one (``self.net(x)``,
    ``trainer.run_epoch(...)``) or a function this module defines: frames Dynamo compiles
    from eager glue."""
    defs = {n.name.value for n in idx.module.body if isinstance(n, (cst.FunctionDef, cst.ClassDef))}
    for st in stmts:
        for n in walk(st):
            if not isinstance(n, cst.Call):
                continue
            f = n.func
            if isinstance(f, cst.Name) and (f.value in params or f.value in defs):
                return True
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value in params:
                return True
    return False


def _computes(stmts: Sequence[cst.BaseStatement]) -> bool:
    """Anything beyond returning names: a call, arithmetic, indexing."""
    return any(isinstance(n, (cst.Call, cst.BinaryOperation, cst.Subscript, cst.UnaryOperation, cst.Comparison))
               for st in stmts for n in walk(st))
