"""The one table of vertex units (include/popsnn/VertexUnits.hpp), from which the host names
the LIF vertices (neuron model, reset, sparse rule or its trace), against the specialisations
the codelets instantiate: every name the host
can ask for exists, and every unit type the table names is defined in codelets/Neurons.hpp."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def table(name: str) -> list:
    text = (ROOT / "include/popsnn/VertexUnits.hpp").read_text()
    body = re.search(rf"\*{name}\[[^\]]*\]\s*=\s*\{{(.*?)\}};", text, re.S).group(1)
    return re.findall(r'"([^"]+)"', body)


def instantiated(vertex: str, source: str) -> set:
    text = (ROOT / "codelets" / source).read_text()
    pattern = rf"^template class {vertex}<([^;]*)>;$"
    return {tuple(a.strip() for a in m.split(",")) for m in re.findall(pattern, text, re.M)}


def test_every_vertex_the_host_can_name_is_instantiated():
    neurons, resets, rules = table("NEURONS"), table("RESETS"), table("RULES")
    assert len(neurons) == 5 and len(resets) == 3 and len(rules) == 3
    # Each rule with its compressed trace and with the dense layout (the plan picks one).
    units = set(rules + table("DENSE_LAYOUT_RULES"))
    forward = {(n, r, rule) for n in neurons for r in resets for rule in units}
    assert instantiated("LifForward", "LifForward.cpp") == forward
    # The backward on the trace each rule leaves (one per distinct trace).
    traces = set(table("TRACES") + table("DENSE_LAYOUT_TRACES"))
    assert len(traces) == 3
    backward = {(n, r, trace) for n in neurons for r in resets for trace in traces}
    assert instantiated("LifBackward", "LifBackward.cpp") == backward


def test_every_unit_in_the_table_is_defined():
    units = (ROOT / "codelets/Neurons.hpp").read_text()
    defined = set(re.findall(r"^(?:struct|using) (\w+)", units, re.M))
    tables = ("NEURONS", "RESETS", "RULES", "TRACES", "DENSE_LAYOUT_RULES", "DENSE_LAYOUT_TRACES")
    for name in sum((table(t) for t in tables), []):
        assert name.removeprefix("popsnn::") in defined, name
