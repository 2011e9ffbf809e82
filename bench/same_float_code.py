"""Is the float code of LifForward's (or LifBackward's) instantiations what it was? Compiles
codelets/LifForward.cpp (--vertex LifBackward: LifBackward.cpp) of a git revision (--before) and
of the working tree, each with every float instantiation the build makes (the names of
include/popsnn/VertexUnits.hpp's tables; a revision before the stored type was a template
parameter names them without ", float"), with the package's codelet flags, then compares the
disassembly function by function (objdump -d -C): names, addresses, relocation offsets and the
alignment padding after a function's last instruction set aside.

    .venv/bin/python bench/same_float_code.py [--before main] [--vertex LifBackward]

Prints the functions that differ and the totals; exit status 1 if any differs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEURONS = ("Leaky", "Synaptic", "RLeakyAllToAll", "Lapicque", "Alpha", "RLeakyOneToOne")
RESETS = ("ResetSubtract", "ResetZero", "ResetNone")
RULES = (("NoRule", "Window", "OneSided"), ("NoRule", "WindowDense", "OneSidedDense"))
TRACES = (("DenseTrace", "CompressedTrace"), ("DenseTrace", "MaskedDenseTrace"))
FLAGS = ["-O3", "-DNDEBUG", "-fPIC", "-fvisibility=hidden", "-fno-math-errno", "-march=native"]
FLAGS += ["-std=gnu++17", "-D__POPC__", f"-I{ROOT}/host/poplar/include"]
FLAGS += ["-include", "initializer_list"]  # LifBackward.cpp loops over a braced list


def units(vertex: str = "LifForward") -> list:
    names = []
    for rules in RULES if vertex == "LifForward" else TRACES:
        for n in NEURONS:
            for r in RESETS:
                for rule in rules:
                    name = f"popsnn::{n},popsnn::{r},popsnn::{rule}"
                    if name not in names:
                        names.append(name)
    return names


def export(rev: str | None, into: Path) -> Path:
    """codelets/ and include/ of `rev` (None: the working tree) under `into`."""
    for folder in ("codelets", "include"):
        if rev is None:
            subprocess.run(["cp", "-r", str(ROOT / folder), str(into)], check=True)
        else:
            tar = subprocess.run(
                ["git", "-C", str(ROOT), "archive", rev, folder], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into / "codelets"


def compile_float(codelets: Path, suffix: str, vertex: str) -> Path:
    source = (codelets / f"{vertex}.cpp").read_text()
    tu = codelets / "float_instances.cpp"
    lines = "".join(f"template class {vertex}<{u}{suffix}>;\n" for u in units(vertex))
    tu.write_text(f'#line 1 "{vertex}.cpp"\n' + source + "\n" + lines)
    obj = codelets / "float_instances.o"
    subprocess.run(["g++", "-c", *FLAGS, f"-I{codelets}", str(tu), "-o", str(obj)], check=True)
    return obj


def functions(obj: Path) -> dict:
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", "-r", str(obj)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found, name = {}, None
    for line in out.splitlines():
        if m := re.match(r"^[0-9a-f]+ <(.*)>:$", line):
            name = normal_name(m.group(1))
            found[name] = []
        elif name and line.strip() and not line.startswith("Disassembly of section"):
            found[name].append(line)
    return {k: normal_body(v) for k, v in found.items()}


def normal_name(text: str) -> str:
    """A float instantiation's or templated helper's name as the untemplated one reads."""
    text = text.replace(", float>", ">")
    text = re.sub(r"(\w+)<float>\(", r"\1(", text)
    text = re.sub(r"(inputFromIds<.*?), float>", r"\1>", text)
    return re.sub(r"(^|<)(void|unsigned int) (\(anonymous namespace\)::)", r"\1\3", text)


def normal_body(lines: list) -> list:
    body = []
    for line in lines:
        ins = line.split("\t", 1)[1] if "\t" in line else line
        ins = re.sub(r"\b[0-9a-f]+ <", "<", ins)
        ins = re.sub(r"R_X86_64_\w+\s+.*", "RELOC", ins)
        ins = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "RIP", ins)
        ins = re.sub(r"^\s*[0-9a-f]+: RELOC", "RELOC", normal_name(ins).strip())
        body.append(ins)
    while body and re.match(r"^(nop|xchg\s+%ax,%ax|data16|cs nopw)", body[-1]):
        body.pop()  # alignment padding after the last instruction, never executed
    return body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="main")
    parser.add_argument("--vertex", default="LifForward", choices=("LifForward", "LifBackward"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before_dir, after_dir = Path(tmp, "before"), Path(tmp, "after")
        before_dir.mkdir()
        after_dir.mkdir()
        before_src = export(args.before, before_dir)
        v = args.vertex
        named = f"class S> class {v}" in (before_src / f"{v}.cpp").read_text()
        before = functions(compile_float(before_src, ",float" if named else "", v))
        after = functions(compile_float(export(None, after_dir), ",float", v))
    same = [k for k in before if after.get(k) == before[k]]
    differ = [k for k in before if k in after and after[k] != before[k]]
    missing = [k for k in before if k not in after]
    extra = [k for k in after if k not in before]
    for label, names in (("differs", differ), ("only before", missing), ("only after", extra)):
        for k in names:
            print(f"{label}: {k[:160]}")
    count = sum(len(v) for v in before.values()), sum(len(v) for v in after.values())
    print(f"{len(units(v))} float instantiations of {v}, {args.before} against the tree:")
    print(
        f"functions {len(same)} identical, {len(differ)} differ, {len(missing)} only before, "
        f"{len(extra)} only after; instructions {count[0]:,} before, {count[1]:,} after"
    )
    return 0 if not (differ or missing or extra) else 1


if __name__ == "__main__":
    sys.exit(main())
