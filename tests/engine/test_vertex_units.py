"""The one table of neuron models (include/popsnn/VertexEnums.hpp's POPSNN_NEURON_MODELS)
against the codelet units and the Python layer classes: every unit the table names is
defined in codelets/Neurons.hpp with the code and the number of state blocks the table gives
it, every model is a layer class of the same name, and the LIF vertices' sources carry no
hand-written instantiation list (the build generates it from the table:
host/src/VertexInstances.cpp)."""

import re
from pathlib import Path

import popsnn
from popsnn import layers

ROOT = Path(__file__).resolve().parents[2]


def rows(macro: str) -> list:
    """(code, name, unit, states) of each line of a table macro."""
    text = (ROOT / "include/popsnn/VertexEnums.hpp").read_text()
    body = re.search(rf"#define {macro}\(X\)(.*?)(?:\n(?!\s)|$)", text, re.S).group(1)
    return [
        (code, name, unit, int(states))
        for code, name, unit, states in re.findall(
            r"X\((\w+), (\w+), (\w+), (\d+)\)", body.replace("\\\n", "")
        )
    ]


def units() -> dict:
    """{unit name: (code, states)} of the units codelets/Neurons.hpp defines."""
    text = (ROOT / "codelets/Neurons.hpp").read_text()
    found = {}
    for name, body in re.findall(r"^struct (\w+) \{(.*?)^\};", text, re.M | re.S):
        code = re.search(r"code = codes::(\w+);", body)
        states = re.search(r"states = (\d+);", body)
        if code and states:
            found[name] = (code.group(1), int(states.group(1)))
    # RLeaky's two units are one template (its code is chosen by the recurrence).
    for unit, code in (
        ("RLeakyAllToAll", "RLEAKY_ALL_TO_ALL"),
        ("RLeakyOneToOne", "RLEAKY_ONE_TO_ONE"),
    ):
        found[unit] = (code, 1)
    return found


def test_every_model_in_the_table_is_a_defined_unit_with_its_states():
    models, variants = rows("POPSNN_NEURON_MODELS"), rows("POPSNN_NEURON_VARIANTS")
    assert [name for _, name, _, _ in models] == [
        "Leaky",
        "Synaptic",
        "RLeaky",
        "Lapicque",
        "Alpha",
    ]
    defined = units()
    for code, _, unit, states in models + variants:
        assert unit in defined, f"{unit} is in the table but not in codelets/Neurons.hpp"
        assert defined[unit] == (code, states), unit


def test_every_model_is_a_layer_class_of_the_same_name():
    names = [name for _, name, _, _ in rows("POPSNN_NEURON_MODELS")]
    assert names == [cls.__name__ for cls in layers.NEURON_TYPES]
    assert all(getattr(popsnn, name) is getattr(layers, name) for name in names)


def test_the_lif_sources_leave_their_instantiations_to_the_build():
    for source in ("LifForward.cpp", "LifBackward.cpp"):
        text = (ROOT / "codelets" / source).read_text()
        assert not re.search(r"^template class Lif", text, re.M), source


def table(name: str) -> list:
    text = (ROOT / "include/popsnn/VertexUnits.hpp").read_text()
    body = re.search(rf"\*{name}\[[^\]]*\]\s*=\s*\{{(.*?)\}};", text, re.S).group(1)
    return re.findall(r'"([^"]+)"', body)


def test_every_reset_rule_and_trace_unit_in_the_tables_is_defined():
    text = (ROOT / "codelets/Neurons.hpp").read_text()
    defined = set(re.findall(r"^(?:struct|using) (\w+)", text, re.M))
    tables = ("RESETS", "RULES", "TRACES", "DENSE_LAYOUT_RULES", "DENSE_LAYOUT_TRACES")
    names = sum((table(t) for t in tables), [])
    assert len(names) == 15
    for name in names:
        assert name.removeprefix("popsnn::") in defined, name
    # The dense layout is its own forward unit and backward trace for each masking rule.
    assert set(table("DENSE_LAYOUT_RULES")) - set(table("RULES")) == {
        "popsnn::WindowDense",
        "popsnn::OneSidedDense",
    }
    assert set(table("DENSE_LAYOUT_TRACES")) - set(table("TRACES")) == {"popsnn::MaskedDenseTrace"}
