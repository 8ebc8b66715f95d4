"""Data-dependent branches: an `if` on a tensor becomes ``torch.where`` (the same names
assigned, or a return in both branches), ``torch.cond`` (branches calling with the same
arguments) or ``torch._assert_async`` (``if cond: raise``). A branch that changes state is
refused: ``where``/``cond`` would always or never apply it. Tests that decide no value are
dropped: a tensor or its copy, a shortcut the code already skips for tracers, a mask or None
when the mask's own ``any()`` decided."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .syntax import add_import, assigned, names, small, walk


def _plain_assigns(block: cst.BaseSuite) -> list[tuple[str, cst.BaseExpression]] | None:
    """[(name, value)] when the block only assigns plain names (one target each)."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    out = []
    for st in block.body:
        for s in small(st) if isinstance(st, cst.SimpleStatementLine) else [None]:
            if not isinstance(s, cst.Assign) or len(s.targets) != 1 or not isinstance(s.targets[0].target, cst.Name):
                return None
            out.append((s.targets[0].target.value, s.value))
    return out


# A draw from a random stream: computed in both arms (torch.where) it would be drawn on
# every call, and what is drawn after it changes.
RANDOM_DRAW = re.compile(r"\btorch\.(rand|randn|randint|randperm|rand_like|randn_like|randint_like|multinomial|"
                         r"bernoulli|normal|poisson)\s*\(|\b(np|numpy)\.random\.|\brandom\.\w+\s*\(|"
                         r"\.(uniform_|normal_|bernoulli_|random_|exponential_|geometric_|cauchy_|log_normal_)\s*\(|"
                         r"\bdropout\w*\s*\(")


def _effects_in(block: cst.CSTNode, ctx: Ctx) -> str | None:
    """The first statement of BLOCK that changes state: writes an attribute or an item, or
    draws random numbers."""
    for n in walk(block):
        if isinstance(n, (cst.AugAssign, cst.Assign)):
            tgts = [n.target] if isinstance(n, cst.AugAssign) else [t.target for t in n.targets]
            if any(isinstance(t, (cst.Attribute, cst.Subscript)) for t in tgts) or RANDOM_DRAW.search(ctx.code(n)):
                return ctx.code(n).strip()
        if isinstance(n, cst.Return) and n.value is not None and RANDOM_DRAW.search(ctx.code(n)):
            return ctx.code(n).strip()
    return None


class _TensorBool(cst.CSTTransformer):
    """Python truth on tensors -> tensor logic: ``not t`` -> ``torch.logical_not(t)``,
    ``a and b`` -> ``torch.logical_and(...)``, ``any(f(x) for x in xs)`` ->
    ``torch.stack([f(x) for x in xs]).any()``, ``a if c else b`` -> ``torch.where(c, a, b)``,
    ``t.item()`` -> ``t``, ``torch.equal(a, b)`` -> ``torch.all(a == b)`` (tensors of one shape)
    (``True if c else False`` -> ``c``). Operands that may be Python bools are wrapped in
    ``torch.as_tensor`` (a no-op on a tensor)."""

    def __init__(self, module: cst.Module):
        self.module = module
        self.changed = False

    def _t(self, node: cst.BaseExpression) -> str:
        code = self.module.code_for_node(node)
        return code if code.startswith("torch.") else f"torch.as_tensor({code})"

    def leave_UnaryOperation(self, original_node: cst.UnaryOperation, updated_node: cst.UnaryOperation
                             ) -> cst.BaseExpression:
        if isinstance(updated_node.operator, cst.Not):
            self.changed = True
            return cst.parse_expression(f"torch.logical_not({self._t(updated_node.expression)})")
        return updated_node

    def leave_BooleanOperation(self, original_node: cst.BooleanOperation, updated_node: cst.BooleanOperation
                               ) -> cst.BaseExpression:
        self.changed = True
        fn = "logical_and" if isinstance(updated_node.operator, cst.And) else "logical_or"
        return cst.parse_expression(f"torch.{fn}({self._t(updated_node.left)}, {self._t(updated_node.right)})")

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        self.changed = True
        body, orelse = (self.module.code_for_node(x) for x in (updated_node.body, updated_node.orelse))
        if (body, orelse) == ("True", "False"):
            return updated_node.test
        if (body, orelse) == ("False", "True"):
            return cst.parse_expression(f"torch.logical_not({self._t(updated_node.test)})")
        return cst.parse_expression(f"torch.where({self._t(updated_node.test)}, {body}, {orelse})")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        f = updated_node.func
        args = updated_node.args
        if self.module.code_for_node(f) == "torch.equal" and len(args) == 2 and not any(a.keyword or a.star
                                                                                         for a in args):
            # a Python bool read on the host -> the same test on tensors of one shape
            self.changed = True
            a, b = (self.module.code_for_node(x.value) for x in args)
            return cst.parse_expression(f"torch.all({a} == {b})")
        if isinstance(f, cst.Attribute) and f.attr.value == "item" and not updated_node.args:
            # `t.item()` in a condition: the 0-d tensor compares to the same truth, and stays in the graph
            self.changed = True
            return f.value
        if isinstance(f, cst.Name) and f.value in ("any", "all") and len(updated_node.args) == 1 and \
                isinstance(updated_node.args[0].value, (cst.GeneratorExp, cst.ListComp)):
            self.changed = True
            comp = updated_node.args[0].value
            lst = self.module.code_for_node(cst.ListComp(elt=comp.elt, for_in=comp.for_in))
            return cst.parse_expression(f"torch.stack({lst}).{f.value}()")
        return updated_node


def tensor_bool(ctx: Ctx, expr: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """(EXPR with its Python truth turned into tensor logic, whether anything changed)."""
    t = _TensorBool(ctx.module)
    out = expr.visit(t)
    assert isinstance(out, cst.BaseExpression)
    return out, t.changed


def where_test(ctx: Ctx, test: cst.BaseExpression) -> str:
    """The condition of a ``torch.where`` made from an ``if``: tensor logic, and a tensor
    (``torch.as_tensor`` unless it is a comparison or a torch call already)."""
    new, _ = tensor_bool(ctx, test)
    code = ctx.code(new)
    return code if isinstance(new, cst.Comparison) or code.startswith("torch.") else f"torch.as_tensor({code})"


def branch_local(ctx: Ctx, st: cst.If) -> set[str]:
    """Names ST's branches bind that no code of the function outside ST mentions (read or
    bound), parameters excluded: values the branch computes for itself."""
    scope = ctx.func if ctx.func is not None else ctx.module
    inside = set(walk(st))
    outside = {n.value for n in walk(scope) if isinstance(n, cst.Name) and n not in inside}
    if ctx.func is not None:
        outside |= {p.name.value for p in ctx.func.params.params}
    bound_here = {t.target.value for n in walk(st) if isinstance(n, cst.Assign)
                  for t in n.targets if isinstance(t.target, cst.Name)}
    return bound_here - outside


def where_assign(ctx: Ctx, st: cst.If) -> list[cst.BaseStatement] | Refusal | None:
    """``if c: a = x`` (``else: a = y``) -> ``a = torch.where(c, x, a or y)`` per name; None
    when the `if` is not of that form. Branches whose assignments read each other (``a =
    f(a); b = g(a)``) are computed in order into temporaries first (both branches run)."""
    orelse = st.orelse.body if isinstance(st.orelse, cst.Else) else None
    if isinstance(st.orelse, cst.If):
        return _where_chain(ctx, st)
    a = _plain_assigns(st.body)
    b = _plain_assigns(orelse) if orelse is not None else []
    if a is None or b is None or not a:
        return None
    targets = list(dict.fromkeys([n for n, _ in a] + [n for n, _ in b]))
    # A name the branch binds only for its own use (`out = layer(h); h = out[0]`) needs no
    # select: nothing outside the `if` reads it, and it may not exist when the test is false.
    targets = [n for n in targets if n not in branch_local(ctx, st)]
    if not targets:
        return None
    test = where_test(ctx, st.test)
    da, db = dict(a), dict(b)
    bound = set(da) | set(db)
    simple = len(da) == len(a) and len(db) == len(b) and set(targets) == bound and not (
        len(bound) > 1 and any(bound & names(v) for v in [*da.values(), *db.values()]))
    if simple:
        lines = [f"{n} = torch.where({test}, {ctx.code(da[n]) if n in da else n}, {ctx.code(db[n]) if n in db else n})"
                 for n in targets]
    else:
        taken = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)}
        then_lines, then_env = _branch(ctx, [(n, v, None) for n, v in a], "then", taken)
        else_lines, else_env = _branch(ctx, [(n, v, None) for n, v in b], "else", taken)
        lines = [*then_lines, *else_lines] + [
            f"{n} = torch.where({test}, {then_env.get(n, n)}, {else_env.get(n, n)})" for n in targets]
    new_stmts: list[cst.BaseStatement] = [cst.parse_statement(ln + "\n") for ln in lines]
    new_stmts[0] = new_stmts[0].with_changes(leading_lines=st.leading_lines)
    return new_stmts


def _where_chain(ctx: Ctx, st: cst.If) -> list[cst.BaseStatement] | None:
    """``if c1: a = x / elif c2: a = y / (else: a = z)`` -> ``a = torch.where(c1, x,
    torch.where(c2, y, z or a))`` per name: every arm only assigns names, none reads a
    name an arm binds (the arms' values are all computed before the select)."""
    arms: list[tuple[cst.BaseExpression, dict[str, cst.BaseExpression]]] = []
    cur: cst.If | None = st
    last: dict[str, cst.BaseExpression] = {}
    while cur is not None:
        a = _plain_assigns(cur.body)
        if not a or len(dict(a)) != len(a):
            return None
        arms.append((cur.test, dict(a)))
        nxt = cur.orelse
        if isinstance(nxt, cst.Else):
            b = _plain_assigns(nxt.body)
            if b is None or len(dict(b)) != len(b):
                return None
            last = dict(b)
        cur = nxt if isinstance(nxt, cst.If) else None
    values = [*(v for _, d in arms for v in d.values()), *last.values()]
    local = branch_local(ctx, st)
    targets = [n for n in dict.fromkeys([n for _, d in arms for n in d] + list(last)) if n not in local]
    if not targets or any(set(targets) & names(v) for v in values) and len(targets) > 1:
        return None
    lines = []
    for n in targets:
        expr = ctx.code(last[n]) if n in last else n
        for test, d in reversed(arms):
            expr = f"torch.where({where_test(ctx, test)}, {ctx.code(d[n]) if n in d else n}, {expr})"
        lines.append(f"{n} = {expr}")
    out: list[cst.BaseStatement] = [cst.parse_statement(ln + "\n") for ln in lines]
    out[0] = out[0].with_changes(leading_lines=st.leading_lines)
    return out


@rule("if-where")
def _if_where(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A data-dependent `if`: same names assigned -> torch.where; returns -> torch.where;
    calls with matching outputs -> torch.cond; `if cond: raise` -> torch._assert_async. The
    condition's Python truth (`not`, `and`, `any(...)`) becomes tensor logic."""
    st = ctx.stmt
    if not isinstance(st, cst.If):
        return
    test = ctx.code(tensor_bool(ctx, st.test)[0])
    eff = _effects_in(st, ctx)
    if eff:
        yield Refusal("if-where", f"a branch changes state (`{eff}`): torch.where/cond would always or never "
                      "apply it, so no rewrite is offered")
        return
    body = list(st.body.body) if isinstance(st.body, cst.IndentedBlock) else []
    orelse = st.orelse.body if isinstance(st.orelse, cst.Else) else None
    # if cond: raise ...
    if len(body) == 1 and orelse is None and any(isinstance(s, cst.Raise) for s in small(body[0])):
        r = next(s for s in small(body[0]) if isinstance(s, cst.Raise))
        msg = "check failed"
        if isinstance(r.exc, cst.Call) and r.exc.args and isinstance(r.exc.args[0].value, cst.SimpleString):
            msg = ast.literal_eval(r.exc.args[0].value.value)
        t = cst.parse_expression(test)
        holds = cst.Module([]).code_for_node(t.args[0].value) if isinstance(t, cst.Call) and cst.Module([]).code_for_node(t.func) == \
            "torch.logical_not" and len(t.args) == 1 else f"torch.logical_not({test})"   # not not c -> c
        new = cst.parse_statement(f"torch._assert_async({holds}, {msg!r})\n")
        yield Rewrite("if-raise-check", "rewrite", "`if cond: raise` -> torch._assert_async (checked in the graph)",
                      "raises RuntimeError instead of the original exception type",
                      {ctx.path: add_import(ctx.swap({st: new.with_changes(leading_lines=st.leading_lines)}),
                                             "import torch")})
        return
    # if cond: return a / (else:) return b
    if _only_return(body) is not None:
        swaps = where_return(ctx, st)
        if swaps is not None:
            yield Rewrite("if-where-return", "rewrite", "returns on both paths -> return torch.where(...)",
                          "computes both branches; they must have the same shape and dtype",
                          {ctx.path: add_import(ctx.swap(swaps), "import torch")})
        return
    made = where_assign(ctx, st)
    if made is None:
        return
    if isinstance(made, Refusal):
        yield made
        return
    local = branch_local(ctx, st)
    targets = list(dict.fromkeys(n for n, _ in [*(_plain_assigns(st.body) or []),
                                                 *(_plain_assigns(st.orelse.body) or [] if isinstance(st.orelse, cst.Else) else [])]
                                 if n not in local))
    yield Rewrite("if-where", "rewrite", f"`if` assigning {', '.join(targets)} -> torch.where",
                  "computes both branches; they must have the same shape and dtype",
                  {ctx.path: add_import(ctx.swap({st: cst.FlattenSentinel(made)}), "import torch")})
    # Calls with the same arguments in both branches: torch.cond runs one branch.
    a = _plain_assigns(st.body) or []
    b = (_plain_assigns(orelse) if orelse is not None else []) or []
    da, db = dict(a), dict(b)
    if len(targets) == 1 and len(a) == len(b) == 1 and targets[0] in da and targets[0] in db:
        ca, cb = da[targets[0]], db[targets[0]]
        if isinstance(ca, cst.Call) and isinstance(cb, cst.Call) and \
                [ctx.code(x) for x in ca.args] == [ctx.code(x) for x in cb.args] and \
                all(not x.keyword and not x.star for x in ca.args):
            args = ", ".join(ctx.code(x.value) for x in ca.args)
            new = cst.parse_statement(f"{targets[0]} = torch.cond({test}, {ctx.code(ca.func)}, {ctx.code(cb.func)}, ({args},))\n")
            yield Rewrite("if-cond", "rewrite", "branches calling with the same arguments -> torch.cond",
                          "torch.cond traces both branches (one runs); their outputs must match in shape and dtype",
                          {ctx.path: add_import(ctx.swap({st: new.with_changes(leading_lines=st.leading_lines)}),
                                                 "import torch")})


_AUG = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}


def _chain(e: cst.BaseExpression) -> bool:
    """A name or an attribute chain of names (``h``, ``self.x_min``)."""
    while isinstance(e, cst.Attribute):
        e = e.value
    return isinstance(e, cst.Name)


def _state_assigns(ctx: Ctx, block: cst.BaseSuite) -> list[tuple[str, cst.BaseExpression, str | None]] | None:
    """[(target, value, operator of an augmented assignment)] when the block only assigns
    names and attributes (``self.n = v``, ``self.n += v``); None otherwise."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    out: list[tuple[str, cst.BaseExpression, str | None]] = []
    for st in block.body:
        if not isinstance(st, cst.SimpleStatementLine):
            return None
        for s in st.body:
            if isinstance(s, cst.Assign) and len(s.targets) == 1 and _chain(s.targets[0].target):
                out.append((ctx.code(s.targets[0].target), s.value, None))
            elif isinstance(s, cst.AugAssign) and _chain(s.target) and ctx.code(s.operator).strip() in _AUG:
                out.append((ctx.code(s.target), s.value, _AUG[ctx.code(s.operator).strip()]))
            else:
                return None
    return out


class _RenameChains(cst.CSTTransformer):
    """Names and attribute chains (by their source) -> the temporaries that hold their values."""

    def __init__(self, ctx: Ctx, env: dict[str, str]):
        self.ctx, self.env = ctx, env

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        code = self.ctx.code(original_node)
        return cst.Name(self.env[code]) if code in self.env else updated_node.with_changes(attr=original_node.attr)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return cst.Name(self.env[updated_node.value]) if updated_node.value in self.env else updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)   # `dim=` names no variable


def _branch(ctx: Ctx, assigns: list[tuple[str, cst.BaseExpression, str | None]], tag: str,
            taken: set[str]) -> tuple[list[str], dict[str, str]]:
    """A branch's assignments (to names and attributes; OP for ``+=``…) in single-assignment
    form: (lines binding temporaries, target -> the source of its value at the branch's end).
    Later assignments read the earlier ones' temporaries, so the branch means what it meant
    in order."""
    env: dict[str, str] = {}
    lines: list[str] = []
    for tgt, value, op in assigns:
        renamed = value.visit(_RenameChains(ctx, env))
        assert isinstance(renamed, cst.BaseExpression)
        v = ctx.code(renamed)
        if op:
            atom = isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float))
            v = f"{env.get(tgt, tgt)} {op} {v if atom else f'({v})'}"
        tmp = f"_{tgt.rsplit('.', 1)[-1]}_{tag}"
        while tmp in taken:
            tmp += "_"
        taken.add(tmp)
        lines.append(f"{tmp} = {v}")
        env[tgt] = tmp
    return lines, env


@rule("if-where-state")
def _if_where_state(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A data-dependent ``if`` whose branches only assign names and attributes — state such as
    running statistics initialised or updated under a tensor test (``if self.lo == self.hi:
    self.lo += x_min``) — -> the new values computed for both arms and chosen with
    ``torch.where``. An ``elif``/``else`` chain after it keeps its tests in Python (they must
    not read tensors: the trial tells) and selects against the first arm in each. An attribute
    only ever updated in place (``+=``) is written back in place (``.copy_``), so whoever holds
    the tensor sees the update as before."""
    st = ctx.stmt
    if not isinstance(st, cst.If) or not ctx.idx.contains(st.test, ctx.site.line):
        return
    arms: list[tuple[cst.BaseExpression | None, cst.BaseSuite]] = []
    cur: cst.If | cst.Else | None = st.orelse
    while cur is not None:
        if isinstance(cur, cst.If):
            arms.append((cur.test, cur.body))
            cur = cur.orelse
        else:
            arms.append((None, cur.body))
            cur = None
    first = _state_assigns(ctx, st.body)
    rest = [(t, _state_assigns(ctx, b)) for t, b in arms]
    if first is None or any(a is None for _, a in rest):
        return
    if not any("." in tgt for tgt, _, _ in first) and not any("." in tgt for _, a in rest for tgt, _, _ in a or []):
        return   # names only: if-where's
    taken = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)}
    cond = "_cond"
    while cond in taken:
        cond += "_"
    taken.add(cond)
    then_lines, then_env = _branch(ctx, first, "then", taken)
    others = [(t, *_branch(ctx, a or [], f"else{i}" if i else "else", taken)) for i, (t, a) in enumerate(rest)]
    if not rest or rest[-1][0] is not None:
        others.append((None, [], {}))   # no else: the values as they were
    targets = list(dict.fromkeys([t for t, _, _ in first] + [t for _, a in rest for t, _, _ in a or []]))
    in_place = {t for t in targets if "." in t and all(op for tg, _, op in first + [x for _, a in rest for x in a or []]
                                                        if tg == t)}

    def select(env: dict[str, str]) -> list[str]:
        out = []
        for t in targets:
            w = f"torch.where({cond}, {then_env.get(t, t)}, {env.get(t, t)})"
            out.append(f"{t}.copy_({w})" if t in in_place else f"{t} = {w}")
        return out

    lines = [f"{cond} = {where_test(ctx, st.test)}", *then_lines]
    if len(others) == 1:
        lines += others[0][1] + select(others[0][2])
        code = "\n".join(lines) + "\n"
    else:
        code = "\n".join(lines) + "\n"
        for i, (test, blines, env) in enumerate(others):
            head = "else:" if test is None else f"{'if' if i == 0 else 'elif'} {ctx.code(test)}:"
            code += head + "\n" + "".join(f"    {ln}\n" for ln in blines + select(env))
    new = list(cst.parse_module(code).body)
    new[0] = new[0].with_changes(leading_lines=st.leading_lines)
    yield Rewrite("if-where-state", "rewrite", f"`if` updating {', '.join(targets)} -> torch.where",
                  "computes the new values on both paths; each must have the value's shape and dtype",
                  {ctx.path: add_import(ctx.swap({st: cst.FlattenSentinel(new)}), "import torch")})


def where_return(ctx: Ctx, st: cst.If) -> dict[cst.CSTNode, object] | None:
    """`if c: return a` + `else: return b` (or a following `return b`) -> one
    `return torch.where(c, a, b)`, as swaps; None when the `if` is not of that form.
    An early return (`if c: return a`, then the function's last statements computing and
    returning `b`) is the same choice made at the end: the test goes down to the final
    `return torch.where(c, a, b)`, when what runs between only binds local names the test
    and `a` do not read (it now runs on both paths: no state changes, no calls for effect)."""
    ret_a = _only_return(list(st.body.body) if isinstance(st.body, cst.IndentedBlock) else [])
    orelse = st.orelse.body if isinstance(st.orelse, cst.Else) else None
    if ret_a is None or isinstance(st.orelse, cst.If):
        return None
    drop = None
    swaps: dict[cst.CSTNode, object] = {}
    test = where_test(ctx, st.test)
    if orelse is not None:
        ret_b = _only_return(list(orelse.body) if isinstance(orelse, cst.IndentedBlock) else [])
    else:
        drop = _next_stmt(ctx, st)
        ret_b = _only_return([drop]) if drop is not None else None
        if ret_b is None:
            rest = _rest_of_function(ctx, st)
            if rest is None or not rest or (ret_b := _only_return(rest[-1:])) is None:
                return None
            if not _binds_locals_only(rest[:-1]) or \
                    {n for x in rest[:-1] for n in assigned(x)} & (names(st.test) | names(ret_a)):
                return None
            new = cst.parse_statement(f"return torch.where({test}, {ctx.code(ret_a)}, {ctx.code(ret_b)})\n")
            first, last = rest[0], rest[-1]
            assert isinstance(first, cst.SimpleStatementLine) and isinstance(last, cst.SimpleStatementLine)
            return {st: cst.RemovalSentinel.REMOVE,   # its comments go with the statement now first
                    first: first.with_changes(leading_lines=[*st.leading_lines, *first.leading_lines]),
                    last: new.with_changes(leading_lines=last.leading_lines)}
    if ret_b is None:
        return None
    new = cst.parse_statement(f"return torch.where({test}, {ctx.code(ret_a)}, {ctx.code(ret_b)})\n")
    swaps[st] = new.with_changes(leading_lines=st.leading_lines)
    if drop is not None:
        swaps[drop] = cst.RemovalSentinel.REMOVE
    return swaps


def _rest_of_function(ctx: Ctx, st: cst.BaseStatement) -> list[cst.BaseStatement] | None:
    """The statements after ST when ST is in the function's own body (not nested)."""
    parent = ctx.parents.get(st)
    if ctx.func is None or parent is not ctx.func.body:
        return None
    body = [b for b in ctx.func.body.body if isinstance(b, cst.BaseStatement)]
    return body[body.index(st) + 1:] if st in body else None


def _binds_locals_only(stmts: Sequence[cst.BaseStatement]) -> bool:
    """Only assignments to plain names (no attribute or item writes, no calls for effect,
    no control flow): running them on another path changes nothing but those locals."""
    for s in stmts:
        if not isinstance(s, cst.SimpleStatementLine):
            return False
        for sm in s.body:
            if isinstance(sm, cst.Assign):
                tgts = [t.target for t in sm.targets]
            elif isinstance(sm, (cst.AnnAssign, cst.AugAssign)):
                tgts = [sm.target]
            else:
                return False
            if not all(isinstance(t, cst.Name) or (isinstance(t, cst.Tuple) and
                                                     all(isinstance(e.value, cst.Name) for e in t.elements))
                       for t in tgts):
                return False
    return True


def _only_return(stmts: Sequence[cst.CSTNode]) -> cst.BaseExpression | None:
    if len(stmts) == 1:
        sm = small(stmts[0])
        if len(sm) == 1 and isinstance(sm[0], cst.Return) and sm[0].value is not None:
            return sm[0].value
    return None


def _next_stmt(ctx: Ctx, st: cst.CSTNode) -> cst.CSTNode | None:
    parent = ctx.parents.get(st)
    body = list(getattr(parent, "body", []) or [])
    if st in body and body.index(st) + 1 < len(body):
        return body[body.index(st) + 1]
    return None


# Methods whose result equals their receiver in value (a copy, or the same tensor laid out
# contiguously): a test choosing between X and X.clone() chooses storage, never a value.
_VALUE_COPIES = ("clone", "contiguous")


def _copy_of(expr: cst.BaseExpression, ctx: Ctx) -> cst.BaseExpression | None:
    """X when EXPR is ``X.clone(...)`` / ``X.contiguous(...)``."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VALUE_COPIES:
        return expr.func.value
    return None


@rule("same-value-arms")
def _same_value_arms(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``X if cond else X.clone()`` (``if cond: X = X.clone()``): both arms are the same
    values (one a copy), so the test only picks storage (an alignment or layout check on
    ``data_ptr()``, strides...). Always take the copy: equal values, never an alias the
    original would not have made."""
    swaps: dict[cst.CSTNode, object] = {}
    st = ctx.stmt
    if isinstance(st, cst.If) and st.orelse is None:
        # `if cond: x = x.clone()`: the statement form (the other arm is `x` unchanged)
        assigns = _plain_assigns(st.body)
        if assigns and len(assigns) == 1 and (base := _copy_of(assigns[0][1], ctx)) is not None \
                and ctx.code(base).strip() == assigns[0][0]:
            swaps[st] = cst.parse_statement(f"{assigns[0][0]} = {ctx.code(assigns[0][1])}\n").with_changes(
                leading_lines=st.leading_lines)
    for n in walk(st):
        if not isinstance(n, cst.IfExp) or not ctx.idx.contains(n, ctx.site.line):
            continue
        for keep, other in ((n.orelse, n.body), (n.body, n.orelse)):
            base = _copy_of(keep, ctx)
            if base is not None and ctx.code(base).strip() == ctx.code(other).strip():
                swaps[n] = keep
                break
    if swaps:
        yield Rewrite("same-value-arms", "rewrite", "a test choosing between a tensor and its copy -> always the copy",
                      "one copy on every call, where the original copied only when its storage test failed",
                      {ctx.path: ctx.swap(swaps)})


# Checks code makes to skip a data-dependent shortcut under a tracer (TorchScript, FX, ONNX
# export): compiling is tracing too, and the branch the code takes for tracers is traceable.
_TRACER_CHECKS = ("torch.jit.is_tracing", "torch.jit.is_scripting", "torch.onnx.is_in_onnx_export",
                  "torch._C._get_tracing_state")


def _tracer_check(n: cst.CSTNode, ctx: Ctx) -> bool:
    if not isinstance(n, cst.Call):
        return False
    f = ctx.code(n.func)
    if f in _TRACER_CHECKS:
        return True
    return f == "isinstance" and len(n.args) == 2 and "torch.fx.Proxy" in ctx.code(n.args[1].value)


@rule("compiling-is-tracing")
def _compiling_is_tracing(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """The code already keeps tracers off this path (``if not is_tracing and <tensor test>``,
    ``is_tracing = torch.jit.is_tracing() or ...``): count ``torch.compiler.is_compiling()`` as
    tracing, so compiled code takes the branch written for tracers (what transformers did
    upstream with ``is_torchdynamo_compiling``)."""
    header = ctx.stmt.test if isinstance(ctx.stmt, (cst.If, cst.While)) else ctx.stmt
    checks = [n for n in walk(header) if _tracer_check(n, ctx)]
    read = names(header)
    flags = [] if ctx.func is None else [
        s for s in walk(ctx.func) if isinstance(s, cst.Assign) and ctx.pos.get(s, 0) < ctx.pos[ctx.stmt]
        and any(isinstance(t.target, cst.Name) and t.target.value in read for t in s.targets)
        and any(_tracer_check(n, ctx) for n in walk(s.value))]
    swaps: dict[cst.CSTNode, object] = {}
    for c in checks:
        swaps[c] = cst.parse_expression(f"({ctx.code(c)} or torch.compiler.is_compiling())")
    for s in flags:
        swaps[s.value] = cst.parse_expression(f"{ctx.code(s.value)} or torch.compiler.is_compiling()")
    if swaps:
        yield Rewrite("compiling-is-tracing", "rewrite",
                      "compiling counts as tracing: the compiled code takes the path the code keeps for tracers",
                      "compiled calls skip the data-dependent shortcut (the tracer path computes what it would "
                      "have skipped)", {ctx.path: add_import(ctx.swap(swaps), "import torch")})


def _reads_state(node: cst.CSTNode, owner: str) -> bool:
    """Does NODE read an attribute of OWNER (the method's ``self``)?"""
    return any(isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == owner
               for n in walk(node))


@rule("cache-hit-not-compiled")
def _cache_hit_not_compiled(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``if <test on the object's state read as a number>: return <a value the object
    keeps>``: a cache hit decided on the host. Compiled code skips the shortcut and computes
    the value as on a miss (``not torch.compiler.is_compiling() and (...)``); the cache is
    still written, and read by eager callers."""
    st = ctx.stmt
    if not isinstance(st, cst.If) or ctx.func is None or not ctx.func.params.params or \
            not re.search(r"GB0124|GB0170|GB0033|[Dd]ata[- ]dependent|item\(\)", ctx.site.gb_id + " " + ctx.site.gb_type):
        return
    owner = ctx.func.params.params[0].name.value
    ret = _only_return(list(st.body.body) if isinstance(st.body, cst.IndentedBlock) else [])
    if ret is None or not _reads_state(ret, owner) or not _reads_state(st.test, owner):
        return
    test = st.test
    inner = ctx.code(test) if isinstance(test, (cst.Name, cst.Attribute, cst.Call, cst.Comparison)) or \
        getattr(test, "lpar", None) else f"({ctx.code(test).strip()})"
    new = st.with_changes(test=cst.parse_expression(f"not torch.compiler.is_compiling() and {inner}"))
    yield Rewrite("cache-hit-not-compiled", "rewrite",
                  "a cache hit decided on the host is skipped when compiling: compiled code computes the value",
                  "compiled calls recompute what the cache holds (it is still written, and read eagerly)",
                  {ctx.path: add_import(ctx.swap({st: new}), "import torch")})


def _any_of(expr: cst.BaseExpression, ctx: Ctx) -> set[str]:
    """The names M whose ``M.any()`` is false whenever EXPR is: EXPR is ``M.any()`` or an
    ``or`` chain holding it."""
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return _any_of(expr.left, ctx) | _any_of(expr.right, ctx)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "any" \
            and not expr.args and isinstance(expr.func.value, cst.Name):
        return {expr.func.value.value}
    return set()


@rule("mask-not-none")
def _mask_not_none(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``M if F else None`` where F is ``M.any()`` (or an ``or`` chain holding it, maybe via a
    name): when F is false, M masks nothing, which is what None says. Pass M always."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.IfExp) or not ctx.idx.contains(n, ctx.site.line) \
                or ctx.code(n.orelse).strip() != "None" or not isinstance(n.body, cst.Name):
            continue
        implied = _any_of(n.test, ctx)
        if isinstance(n.test, cst.Name) and ctx.func is not None:
            for s in walk(ctx.func):
                if isinstance(s, cst.Assign) and ctx.pos.get(s, 0) < ctx.pos[ctx.stmt] and len(s.targets) == 1 \
                        and ctx.code(s.targets[0].target).strip() == n.test.value:
                    implied = _any_of(s.value, ctx)   # the last binding before the site counts
        if n.body.value in implied:
            swaps[n] = n.body
    if swaps:
        yield Rewrite("mask-not-none", "rewrite", "an all-False mask instead of None: pass the mask always",
                      "the callee gets a mask with no True where it got None: the same only where the callee "
                      "treats an all-False mask as no mask (checked on your calls)", {ctx.path: ctx.swap(swaps)})


def _mask_tested(test: cst.BaseExpression, ctx: Ctx) -> str | None:
    """M's source when TEST is true exactly when the boolean tensor M has a True:
    ``M.any()``, ``torch.any(M)``, ``M.sum() > 0``, ``M.nonzero().numel() > 0`` (``.item()``
    or ``bool(...)`` around any of them)."""
    code = ctx.code(test).strip()
    for pat in (r"bool\((.+)\)", r"(.+)\.item\(\)"):
        m = re.fullmatch(pat, code)
        if m:
            code = m.group(1).strip()
    for pat in (r"(.+)\.any\(\)", r"torch\.any\((.+)\)", r"(.+)\.sum\(\)\s*>\s*0", r"(.+)\.nonzero\(\)\.numel\(\)\s*>\s*0",
                r"torch\.count_nonzero\((.+)\)\s*>\s*0", r"(.+)\.count_nonzero\(\)\s*>\s*0"):
        m = re.fullmatch(pat, code)
        if m and re.fullmatch(r"[\w.]+|\([^()]*\)", m.group(1).strip()):
            return m.group(1).strip().removeprefix("(").removesuffix(")")
    return None


def _writes_only_through(stmt: cst.BaseStatement, mask: str, ctx: Ctx) -> bool:
    """Does STMT only change elements selected by MASK (``X[M] = v``, ``X[M] += v``,
    ``X.masked_fill_(M, v)``, ``X.masked_scatter_(M, v)``)? Then it does nothing when M has no True."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]
            if not all(isinstance(t, cst.Subscript) and len(t.slice) == 1
                       and ctx.code(t.slice[0].slice).strip() == mask for t in targets):
                return False
        elif isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and isinstance(s.value.func, cst.Attribute):
            if s.value.func.attr.value not in ("masked_fill_", "masked_scatter_") or not s.value.args \
                    or ctx.code(s.value.args[0].value).strip() != mask:
                return False
        else:
            return False
    return True


@rule("masked-update-unguarded")
def _masked_update_unguarded(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``if M.any(): X[M] = v`` (``masked_fill_(M, v)``, ``X[M] += v``): an update through
    the mask M changes nothing when M has no True, so the test can go (the update traces)."""
    st = ctx.stmt
    if not isinstance(st, cst.If) or st.orelse is not None or not isinstance(st.body, cst.IndentedBlock):
        return
    mask = _mask_tested(st.test, ctx)
    if mask is None:
        return
    if not all(_writes_only_through(b, mask, ctx) for b in st.body.body):
        yield Refusal("masked-update-unguarded", f"the branch does more than update through `{mask}`: "
                      "dropping the test would change what runs when it has no True")
        return
    lines = [b for b in st.body.body if isinstance(b, cst.SimpleStatementLine)]   # all of them (checked above)
    body = [b.with_changes(leading_lines=st.leading_lines if i == 0 else b.leading_lines) for i, b in enumerate(lines)]
    yield Rewrite("masked-update-unguarded", "rewrite", f"`if {mask}.any():` around an update through {mask} -> "
                  "the update alone", "the masked update always runs (a no-op when the mask is all False)",
                  {ctx.path: ctx.swap({st: cst.FlattenSentinel(body)})})


@rule("assert-tensor")
def _assert_tensor(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``assert not t.any()`` (``a and b``, ``not``: Python truth of a tensor, a
    data-dependent branch) -> ``assert torch.logical_not(t.any())``: an assert on a tensor
    is one Dynamo compiles into a run-time check; eager still raises AssertionError."""
    if not isinstance(ctx.stmt, cst.SimpleStatementLine) or len(ctx.stmt.body) != 1 or \
            not isinstance(ctx.stmt.body[0], cst.Assert) or not re.search(r"[Dd]ata[- ]dependent|GB0170",
                                                                           ctx.site.gb_type + " " + ctx.site.gb_id):
        return
    st = ctx.stmt.body[0]
    test = where_test(ctx, st.test)
    if test == ctx.code(st.test):
        return
    new = st.with_changes(test=cst.parse_expression(test))
    yield Rewrite("assert-tensor", "rewrite", "an assert on a tensor's Python truth -> an assert on the tensor",
                  "checked at run time inside the graph (an AssertionError eagerly, a RuntimeError compiled)",
                  {ctx.path: add_import(ctx.swap({st: new}), "import torch")})


@rule("flag-first")
def _flag_first(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``if <tensor test> and FLAG:`` (``or`` too) -> ``if FLAG and <tensor test>:``: the
    Python flag decides first, so the tensor is never read when it short-circuits. The truth
    of an ``and``/``or`` does not depend on the order; only when the tensor test runs does."""
    if not re.search(r"[Dd]ata[- ]dependent|GB0170|GB0033|GB0124", ctx.site.gb_type + " " + ctx.site.gb_id):
        return
    test = getattr(ctx.stmt, "test", None)
    if test is None and isinstance(ctx.stmt, cst.SimpleStatementLine) and len(ctx.stmt.body) == 1 \
            and isinstance(ctx.stmt.body[0], cst.Assert):
        test = ctx.stmt.body[0].test
    if not isinstance(test, cst.BooleanOperation):
        return
    swaps: dict[cst.CSTNode, object] = {}
    op: cst.BaseExpression = test
    while isinstance(op, cst.BooleanOperation):   # the chain `a and b and FLAG` nests to the left
        if _plain(op.right) and not _plain(op.left):
            flag = op.right.with_changes(lpar=[], rpar=[]) if isinstance(op.right, cst.Name) else op.right
            left = op.left if op.left.lpar or not isinstance(op.left, cst.BooleanOperation) else \
                op.left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            swaps[op] = op.with_changes(left=flag, right=left)
            break
        op = op.left
    if swaps:
        yield Rewrite("flag-first", "rewrite", "the Python flag tested before the tensor",
                      "none: the same truth value; the tensor test runs only when the flag lets it",
                      {ctx.path: ctx.swap(swaps)})


def _plain(e: cst.BaseExpression) -> bool:
    """A name, an attribute chain or a constant: nothing that computes or reads a tensor."""
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        return _plain(e.expression)
    return isinstance(e, (cst.Name, cst.Integer, cst.SimpleString)) or \
        (isinstance(e, cst.Attribute) and _plain(e.value))
