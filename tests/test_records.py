"""Record parsing details that Dynamo's output format dictates (torch 2.13 layout)."""

from graphstitch.analysis import build_census, normalize_guard_failure
from graphstitch.records import Decoder, RecompileReasons, Record, format_record, iter_trace_records


def decode(meta, payload=None):
    return Decoder().decode(Record(meta, payload))


def test_recompile_reasons_string_or_list():
    one = decode({"artifact": {"name": "recompile_reasons", "encoding": "json"}, "frame_id": 0,
                  "frame_compile_id": 1}, '"0/0: tensor \'x\' size mismatch at index 0. expected 2, actual 3"')
    many = decode({"artifact": {"name": "recompile_reasons", "encoding": "json"}, "frame_id": 0,
                   "frame_compile_id": 2},
                  '[\n"0/1: tensor \'x\' dtype mismatch. expected Float, actual Double",\n"0/0: n == 2"\n]')
    assert one == [RecompileReasons("0/1", ["0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"])]
    assert many[0].reasons == ["0/1: tensor 'x' dtype mismatch. expected Float, actual Double", "0/0: n == 2"]
    # The newest cache entry's failure is the cause.
    c = build_census(one + many)
    assert [r.reason for r in c.recompiles] == ["tensor 'x' dtype mismatch", "tensor 'x' size mismatch at index 0"]


def test_normalize_guard_failure_strips_values_ids_and_comments():
    assert normalize_guard_failure(
        "0/0: n == 2                                                   # def bs(x, n): return x*n  # a.py:62 in bs\n"
        "User stack trace:\n  File \"a.py\", line 62") == "n == <value>"
    assert normalize_guard_failure("3/1: tensor 'L['x']' stride mismatch at index 1. expected 4, actual 8") == \
        "tensor 'L['x']' stride mismatch at index 1"
    assert normalize_guard_failure("1/0: ___check_obj_id(L['self'].mod, 140245101)") == \
        "___check_obj_id(L['self'].mod, <id>)"
    assert normalize_guard_failure("0/0: 2 <= L['x'].size()[0]") == "<value> <= L['x'].size()[0]"


def test_trace_text_roundtrip_counts_malformed_lines():
    metas = [({"str": ["/a/model.py", 0]}, None),
             ({"dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 0}]}, "frame_id": 0,
               "frame_compile_id": 0, "attempt": 0}, None),
             ({"dynamo_output_graph": {"sizes": {}}, "frame_id": 0, "frame_compile_id": 0,
               "has_payload": "x"}, "class GraphModule:\n    pass")]
    text = "".join(format_record(m, p) for m, p in metas)
    text = "garbage line\n" + text + "V1122 01:02:03.000 1 x.py:1] {not json\n\tstray payload\n"
    dec = Decoder()
    events = [e for rec in iter_trace_records(text.splitlines(keepends=True), dec) for e in dec.decode(rec)]
    assert dec.malformed == 2
    c = build_census(events)
    assert [(g.compile_id, g.file, g.function) for g in c.graphs] == [("0/0", "/a/model.py", "f")]


def test_break_with_unknown_gb_id_keeps_its_own_text():
    payload = ("Graph break in user code at /u/m.py:7\nGraph Break Reason: Some future break\n"
               "  Explanation: Something torch 2.13 does not know yet.\n  Hint: Try the future.\n\n"
               " For more details about this graph break, please visit: "
               "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb9999.html\n\n"
               "User code traceback:\n  File \"/u/m.py\", line 7, in fwd\n    y = future(x)\n")
    events = decode({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"},
                     "frame_id": 0, "frame_compile_id": 0, "attempt": 0}, payload)
    (s,) = build_census(events).sites
    assert (s.gb_id, s.file, s.line, s.function, s.code) == ("GB9999", "/u/m.py", 7, "fwd", "y = future(x)")
    assert (s.gb_type, s.explanation, s.hints) == ("Some future break", "Something torch 2.13 does not know yet.",
                                                   ["Try the future."])
