"""hp/_cdef.py must say exactly what include/hp.h says.

Three checks, each against the real headers run through the C compiler:
  * prototypes, structs and enums: `cc -E -P` of hp.h, parsed with pycparser
    (cffi's own parser) and compared, after normalising, to the cdef;
  * integer #defines: every HP_* object-like macro with an integer value,
    evaluated from its preprocessed expansion, equals the cdef's #define;
  * layout: a compiled probe prints sizeof/offsetof/enum values, which must
    match what cffi computes from the cdef.
"""

import ast
import difflib
import re
import subprocess

import pycparser
import pytest
from pycparser import c_ast, c_generator

from hp import _lib
from hp._cdef import CDEF

# Stand-ins for <stddef.h>/<stdint.h>: the types cffi knows natively.
STUB_TYPES = ("size_t", "uint32_t", "int32_t", "uint64_t", "int64_t", "uintptr_t",
              "uint8_t", "int8_t", "uint16_t", "int16_t", "intptr_t", "ptrdiff_t")
STUB_TYPEDEFS = "".join(f"typedef int {t};\n" for t in STUB_TYPES)


def preprocess(cc, args, text=None):
    proc = subprocess.run([cc, *args], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, f"{cc} {' '.join(args)} failed:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def header_text(cc, include_dir, tmp_path_factory):
    stubs = tmp_path_factory.mktemp("stub-include")
    for name in ("stddef.h", "stdint.h"):
        (stubs / name).write_text("/* empty: the types come from STUB_TYPEDEFS */\n")
    return preprocess(cc, ["-E", "-P", "-nostdinc", "-I", str(stubs), "-I", str(include_dir),
                           str(include_dir / "hp.h")])


def _strip_names(node):
    """Drop parameter names: they are not part of the ABI."""
    for param in (node.args.params if node.args else []):
        if isinstance(param, (c_ast.Decl, c_ast.Typename)):
            param.name = None
            inner = param.type
            while not isinstance(inner, c_ast.TypeDecl) and hasattr(inner, "type"):
                inner = inner.type
            if isinstance(inner, c_ast.TypeDecl):
                inner.declname = None


def declarations(text):
    """{"function hp_x": canonical text, "struct hp_y": ..., "enum hp_z": ...}."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    tree = pycparser.CParser().parse(STUB_TYPEDEFS + text)
    gen = c_generator.CGenerator()
    out = {}
    for node in tree.ext:
        if isinstance(node, c_ast.Typedef) and node.name in STUB_TYPES:
            continue
        if isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            _strip_names(node.type)
            key = f"function {node.name}"
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.Struct):
            key = f"struct {node.type.name}"
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.Enum):
            key = f"enum {node.type.name}"
        else:
            key = f"other {gen.visit(node)}"
        assert key not in out, f"{key} declared twice"
        out[key] = " ".join(gen.visit(node).split())
    return out


def cdef_defines():
    return {m.group(1): int(m.group(2), 0)
            for m in re.finditer(r"^[ \t]*#define[ \t]+(\w+)[ \t]+(\S+)[ \t]*$", CDEF, re.M)}


_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_OPS = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult,
        ast.LShift, ast.RShift, ast.BitOr, ast.BitAnd, ast.BitXor, ast.USub, ast.UAdd)


def c_int_value(expr):
    """Value of a preprocessed integer constant expression like (21UL << 56)."""
    tree = ast.parse(_SUFFIX.sub(r"\1", expr).strip(), mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _OPS) or (isinstance(node, ast.Constant)
                                          and not isinstance(node.value, int)):
            raise ValueError(f"not a plain integer expression: {expr!r}")
    return eval(compile(tree, "<macro>", "eval"), {"__builtins__": {}})  # only ints and ops


def header_defines(cc, include_dir):
    """{NAME: value} of every object-like HP_* macro whose body is an integer
    expression (include guards, empty markers and {...} initialisers are not)."""
    listing = preprocess(cc, ["-E", "-dM", "-I", str(include_dir), str(include_dir / "hp.h")])
    names = []
    for m in re.finditer(r"^#define (HP_\w+)(\(?)(.*)$", listing, re.M):
        name, func, body = m.groups()
        if func or not body.strip() or body.strip().startswith("{"):
            continue
        names.append(name)
    probe = "#include <hp.h>\n" + "".join(f"hp_probe_{n} = {n};\n" for n in names)
    expanded = preprocess(cc, ["-E", "-P", "-I", str(include_dir), "-"], probe)
    values = dict(re.findall(r"^hp_probe_(\w+) = (.*);$", expanded, re.M))
    assert sorted(values) == sorted(names)
    return {name: c_int_value(expr) for name, expr in values.items()}


def _diff(header, cdef):
    lines = []
    for key in sorted(set(header) | set(cdef)):
        if key not in cdef:
            lines.append(f"missing from hp/_cdef.py: {header[key]}")
        elif key not in header:
            lines.append(f"in hp/_cdef.py but not in include/hp.h: {cdef[key]}")
        elif header[key] != cdef[key]:
            lines.append(f"{key} differs:")
            lines += difflib.ndiff([header[key]], [cdef[key]])
    return "\n".join(lines)


def test_declarations_match_header(header_text):
    header, cdef = declarations(header_text), declarations(CDEF)
    assert header == cdef, "hp/_cdef.py drifted from include/hp.h:\n" + _diff(header, cdef)


def test_declarations_cover_every_exported_function(header_text):
    functions = [k.split()[1] for k in declarations(header_text) if k.startswith("function ")]
    assert len(functions) >= 14
    for name in functions:  # ABI mode resolves each symbol on first access
        assert getattr(_lib.lib, name) is not None, name


def test_integer_defines_match_header(cc, include_dir):
    header, cdef = header_defines(cc, include_dir), cdef_defines()
    assert "HP_F_PAGE_2M" in header and header["HP_F_PAGE_2M"] == 21 << 56
    assert header == cdef, "integer #defines of hp/_cdef.py drifted from include/hp.h:\n" + \
        _diff({k: f"#define {k} {v:#x}" for k, v in header.items()},
              {k: f"#define {k} {v:#x}" for k, v in cdef.items()})


def test_cffi_layout_matches_compiler(cc, include_dir, tmp_path):
    ffi = _lib.ffi
    structs = [k.split()[1] for k in declarations(CDEF) if k.startswith("struct ")]
    enums = [k.split()[1] for k in declarations(CDEF) if k.startswith("enum ")]
    lines, expected = [], {}
    for s in structs:
        ctype = ffi.typeof(f"struct {s}")
        if ctype.fields is None:
            continue  # opaque (struct hp_stack)
        lines.append(f'printf("sizeof {s} %zu\\n", sizeof(struct {s}));')
        lines.append(f'printf("alignof {s} %zu\\n", _Alignof(struct {s}));')
        expected[f"sizeof {s}"] = ffi.sizeof(ctype)
        expected[f"alignof {s}"] = ffi.alignof(ctype)
        for field, _ in ctype.fields:
            lines.append(f'printf("offsetof {s}.{field} %zu\\n", offsetof(struct {s}, {field}));')
            expected[f"offsetof {s}.{field}"] = ffi.offsetof(ctype, field)
    for e in enums:
        for name, value in ffi.typeof(f"enum {e}").elements.items():
            lines.append(f'printf("enum {e}.%s %lld\\n", "{value}", (long long){value});')
            expected[f"enum {e}.{value}"] = name
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <hp.h>\n"
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    preprocess(cc, ["-std=c11", "-I", str(include_dir), "-o", str(exe), str(src)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        key, value = line.rsplit(" ", 1)
        got[key] = int(value)
    assert got == expected


def test_drift_detector_catches_a_changed_header(header_text):
    """The comparison is not vacuous: a one-type change in a struct or a
    prototype shows up."""
    changed = header_text.replace("uint64_t huge_bytes;", "uint32_t huge_bytes;")
    assert changed != header_text
    assert declarations(changed) != declarations(CDEF)
    changed = re.sub(r"int32_t\s+hp_free\s*\(", "int64_t hp_free(", header_text)
    assert declarations(changed) != declarations(CDEF)
