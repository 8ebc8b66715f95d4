"""The Python API: census, census_calls, capture; no contamination between censuses."""

import torch

import graphstitch
from conftest import SCENARIOS, marked_line
from graphstitch.model import Census

NESTED = SCENARIOS / "sc_nested3.py"


def breaky(x):
    x = x + 1
    print("inside")  # API_BREAK
    return x * 2


def test_census_one_call():
    c = graphstitch.census(breaky, torch.randn(3))
    (s,) = c.sites
    assert (s.gb_id, s.file, s.line) == ("GB0059", __file__, marked_line(__file__, "API_BREAK"))
    assert c.graph_count == 2 and c.outputs_match_eager is True and c.calls == 1


def test_census_calls_sees_recompiles():
    def f(x):
        return x.cos() + 1
    c = graphstitch.census_calls(f, [(torch.randn(2),), (torch.randn(5),), (torch.randn(7),)])
    (cause,) = c.recompiles
    assert cause.reason == "tensor 'x' size mismatch at index 0" and cause.count == 1
    assert c.graph_count == 2 and not c.sites


def test_capture_around_user_compiled_code():
    import sc_nested3
    compiled = torch.compile(sc_nested3.f, backend="eager")  # the user's own backend
    with graphstitch.capture() as cap:
        compiled(torch.randn(4))
    c = cap.census
    (s,) = c.sites
    assert (s.gb_id, s.file, s.line, s.events) == ("GB0025", str(NESTED), marked_line(NESTED, "BREAK"), 3)
    assert c.graph_count == 6  # counted from the trace's dynamo_output_graph records
    assert c.outputs_match_eager is None  # graphstitch did not run the target itself


def test_consecutive_censuses_do_not_contaminate():
    import sc_nested3
    first = graphstitch.census(sc_nested3.f, torch.randn(4)).to_dict()
    graphstitch.census(breaky, torch.randn(3))
    # The second census of the same file gets no `str` intern records from torch (interning is
    # per process): file names must still resolve.
    again = graphstitch.census(sc_nested3.f, torch.randn(4)).to_dict()
    for d in (first, again):
        d.pop("compile_seconds")
        d.pop("frames")
        d.pop("guards")  # guard text carries its own latency
        d["trace_stats"] = None
    assert first == again
    assert all("<interned" not in g["file"] for g in again["graphs"])


def test_census_error_is_reported_not_raised():
    def bad(x):
        raise RuntimeError("nope")
    c = graphstitch.census(bad, torch.randn(2))
    assert c.error.kind.value == "eager" and "nope" in c.error.message


def test_outputs_mismatch_is_detected():
    state = {"n": 0}

    def drifting(x):
        state["n"] += 1  # a side effect that makes eager and compiled calls differ
        return x * state["n"]
    c = graphstitch.census(drifting, torch.ones(2))
    assert c.outputs_match_eager is False and "call 0" in c.output_mismatch


def test_numpy_outputs_are_compared_and_a_numpy_scalar_equals_dynamos_0d_array():
    import numpy as np

    def mean_score(x):
        a = x.numpy()
        return np.mean(a * 2.0), a[:2] * 3.0   # Dynamo traces NumPy: a 0-d array comes back

    eager = mean_score(torch.arange(4.0))
    compiled = torch.compile(mean_score, backend="eager")(torch.arange(4.0))
    assert isinstance(eager[0], np.generic) and isinstance(compiled[0], np.ndarray) and compiled[0].ndim == 0
    c = graphstitch.census(mean_score, torch.arange(4.0))
    assert c.outputs_match_eager is True, c.output_mismatch

    calls = {"n": 0}

    def drifting(x):
        calls["n"] += 1                        # eager and compiled calls see different counts
        return x.numpy() * calls["n"]
    c = graphstitch.census(drifting, torch.ones(2))
    assert c.outputs_match_eager is False and "out" in c.output_mismatch   # arrays are compared too


def test_to_dict_roundtrip():
    c = graphstitch.census(breaky, torch.randn(3))
    assert Census.from_dict(c.to_dict()).to_dict() == c.to_dict()


def test_options_backend_dynamic_grad():
    def f(x, w):
        y = (x @ w).relu()
        print("mid")  # OPT_BREAK
        return y.sum()
    w = torch.randn(3, 3, requires_grad=True)
    c = graphstitch.census_calls(f, [(torch.randn(2, 3), w), (torch.randn(4, 3), w)],
                                 backend="aot_eager", dynamic=True, grad=True)
    assert c.error is None, c.error
    assert [(s.gb_id, s.line) for s in c.sites] == [("GB0059", marked_line(__file__, "OPT_BREAK"))]
    assert c.recompiles == []  # dynamic=True: no size specialization
    assert c.config["backend"] == "aot_eager" and c.config["grad"] is True
    assert all(g.op_count for g in c.graphs) and c.outputs_match_eager is True


def test_recompile_limit_fallback_is_a_located_skipped_frame():
    def scaled(x, n):
        return x * n
    with torch._dynamo.config.patch(recompile_limit=2):
        c = graphstitch.census_calls(scaled, [(torch.randn(2), i) for i in range(2, 7)], dynamic=False)
    (cause,) = c.recompiles
    assert cause.reason == "n == <value>" and cause.frames == ["scaled"]
    (sk,) = c.skipped_frames
    assert (sk.function, sk.file) == ("scaled", __file__) and "recompile limit" in sk.reason
    assert c.outputs_match_eager is True  # the fallback runs eagerly: still correct
