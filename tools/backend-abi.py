#!/usr/bin/env python3
"""The plugin ABI baseline: every struct of include/hp/backend.h (its size, and
each member's offset, size and type), every object-like HP_* macro and the
entry symbol, measured by the C compiler from the header itself.

  backend-abi.py dump  CC INCLUDE_DIR                 print the layout
  backend-abi.py write CC INCLUDE_DIR BASELINE        refresh abi/backend-layout.txt
  backend-abi.py check CC INCLUDE_DIR BASELINE        compare; exit 1 with a diff

The member lists are read from the header text (not from a hand-kept list),
so a member added, moved or retyped anywhere shows up; the numbers come from
a program compiled against the header (offsetof, sizeof), so they are the
compiler's, not this script's. check explains each difference:
incompatible (a member moved, changed size or type, or went away; a struct
shrank; a value changed) or compatible but unrecorded (a member appended
past the old end, a new struct or macro): both fail until the baseline is
refreshed on purpose (docs/abi-policy.md, "The plugin ABI").
"""
import os
import re
import subprocess
import sys
import tempfile

HEADER = "hp/backend.h"
TYPE_WORDS = {"const", "volatile", "struct", "union", "enum", "unsigned", "signed", "char",
              "short", "int", "long", "void", "float", "double", "_Bool"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def norm(s):
    s = " ".join(s.split())
    s = re.sub(r"\s*\*\s*", " *", s).replace("* *", "**").replace("* *", "**")
    s = re.sub(r"\s*([(),\[\]])\s*", r"\1", s)
    return s.replace(",", ", ").strip()


def param_type(p):
    """A parameter's type without its name: "const struct hp_host *host" ->
    "const struct hp_host *"."""
    p = norm(p)
    m = re.match(r"^(.*?)([A-Za-z_]\w*)$", p)
    if not m or p in ("void", "..."):
        return p
    before, name = m.group(1).strip(), m.group(2)
    if not before or name in TYPE_WORDS or before.split()[-1] in ("struct", "union", "enum"):
        return p
    return norm(before)


def member_decls(body, where):
    """(name, type) of each member in a struct body."""
    out = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        if "{" in decl or "}" in decl or ":" in decl:
            raise SystemExit(f"{where}: nested aggregates and bit-fields are not in the "
                             f"plugin contract's style; teach tools/backend-abi.py first: {decl!r}")
        fp = re.match(r"^(.*?)\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\((.*)\)$", decl)
        if fp:
            ret, name, params = fp.groups()
            types = [param_type(p) for p in re.split(r",(?![^()]*\))", params)]
            out.append((name, f"{norm(ret)} (*)({', '.join(types)})"))
            continue
        m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*((?:\[[^\]]*\])*)$", decl)
        if not m or "," in decl:
            raise SystemExit(f"{where}: cannot read member declaration {decl!r} "
                             f"(one member per declaration, please)")
        out.append((m.group(2), norm(m.group(1) + m.group(3))))
    return out


def parse_header(path):
    raw = open(path).read()
    text = strip_comments(raw)
    structs = []
    for m in re.finditer(r"\bstruct\s+([A-Za-z_]\w*)\s*\{([^{}]*)\}\s*;", text):
        structs.append((m.group(1), member_decls(m.group(2), f"struct {m.group(1)}")))
    typedefs = []
    for m in re.finditer(r"\btypedef\s+([^;]*?)\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(([^;]*)\)\s*;",
                         text):
        types = [param_type(p) for p in re.split(r",(?![^()]*\))", m.group(3))]
        typedefs.append((m.group(2), f"{norm(m.group(1))} (*)({', '.join(types)})"))
    macros = []
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(HP_\w+)(?![\w(])[ \t]*(.*)$", text, re.M):
        name, value = m.group(1), m.group(2).strip()
        if not value or "__attribute__" in value or name in [n for n, _ in macros]:
            continue  # include guard, export attribute (defined once per compiler)
        if re.fullmatch(r'"[^"]*"', value):
            kind = "str"
        elif re.fullmatch(r"[A-Za-z_]\w*", value) and not value.startswith(("HP_", "UINT")):
            kind = "sym"  # a symbol name such as the entry point
        else:
            kind = "num"
        macros.append((name, kind))
    return structs, typedefs, macros


def measure(cc, inc, header_path):
    """Run a program compiled against the header; return the layout lines."""
    structs, typedefs, macros = parse_header(header_path)
    if not structs:
        raise SystemExit(f"no struct found in {header_path}")
    c = ["#include <" + HEADER + ">", "#include <stddef.h>", "#include <stdio.h>",
         "#define HPABI_STR2(x) #x", "#define HPABI_STR(x) HPABI_STR2(x)",
         "int main(void)", "{"]
    for name, members in structs:
        c.append(f'    printf("struct {name} size=%zu\\n", sizeof(struct {name}));')
        for mname, mtype in members:
            c.append(f'    printf("  {name}.{mname} offset=%zu size=%zu type={mtype}\\n", '
                     f'offsetof(struct {name}, {mname}), sizeof(((struct {name} *)0)->{mname}));')
    for t, ttype in typedefs:
        c.append(f'    printf("typedef {t} size=%zu type={ttype}\\n", sizeof({t}));')
    for name, kind in macros:
        if kind == "num":
            c.append(f'    printf("define {name} = %llu\\n", (unsigned long long)({name}));')
        elif kind == "str":
            c.append(f'    printf("define {name} = \\"%s\\"\\n", {name});')
        else:
            c.append(f'    printf("define {name} = %s\\n", HPABI_STR({name}));')
    c += ["    return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        open(src, "w").write("\n".join(c) + "\n")
        r = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", inc, src, "-o", exe],
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"the layout program does not compile against {inc}:\n{r.stderr}")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def parse_layout(lines):
    """{struct: (size, {member: (offset, size, type)})}, {name: value}."""
    structs, values, cur = {}, {}, None
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^struct (\w+) size=(\d+)$", line)
        if m:
            cur = m.group(1)
            structs[cur] = (int(m.group(2)), {})
            continue
        m = re.match(r"^\s+(\w+)\.(\w+) offset=(\d+) size=(\d+) type=(.*)$", line)
        if m:
            structs[m.group(1)][1][m.group(2)] = (int(m.group(3)), int(m.group(4)), m.group(5))
            continue
        m = re.match(r"^(typedef|define) (\w+) (?:size=|= )(.*)$", line)
        if m:
            values[f"{m.group(1)} {m.group(2)}"] = m.group(3)
            continue
        raise SystemExit(f"unreadable baseline line: {line!r}")
    return structs, values


def explain(old_lines, new_lines):
    """Human-readable reasons, each 'INCOMPATIBLE: ...' or 'unrecorded: ...'."""
    old, oldv = parse_layout(old_lines)
    new, newv = parse_layout(new_lines)
    why = []
    for s, (osize, omem) in old.items():
        if s not in new:
            why.append(f"INCOMPATIBLE: struct {s} is gone")
            continue
        nsize, nmem = new[s]
        for mname, (off, size, typ) in omem.items():
            if mname not in nmem:
                why.append(f"INCOMPATIBLE: {s}.{mname} (offset {off}) was removed or renamed")
                continue
            noff, nsz, ntyp = nmem[mname]
            if noff != off:
                why.append(f"INCOMPATIBLE: {s}.{mname} moved from offset {off} to {noff}")
            if nsz != size:
                why.append(f"INCOMPATIBLE: {s}.{mname} changed size from {size} to {nsz}")
            if ntyp != typ:
                why.append(f"INCOMPATIBLE: {s}.{mname} changed type from '{typ}' to '{ntyp}'")
        if nsize < osize:
            why.append(f"INCOMPATIBLE: struct {s} shrank from {osize} to {nsize} bytes")
        for mname, (noff, nsz, _) in nmem.items():
            if mname in omem:
                continue
            if noff >= osize:
                why.append(f"unrecorded: {s}.{mname} appended at offset {noff} (past the old "
                           f"end, {osize}): compatible; refresh the baseline in the same commit")
            else:
                why.append(f"INCOMPATIBLE: {s}.{mname} inserted at offset {noff}, inside the "
                           f"old {osize} bytes")
        if nsize > osize and all(m in omem for m in nmem):
            why.append(f"INCOMPATIBLE: struct {s} grew from {osize} to {nsize} bytes without a "
                       f"new member (padding or an array grew)")
    for s in new:
        if s not in old:
            why.append(f"unrecorded: new struct {s}; refresh the baseline in the same commit")
    for k, v in oldv.items():
        if k not in newv:
            why.append(f"INCOMPATIBLE: {k} is gone")
        elif newv[k] != v:
            why.append(f"INCOMPATIBLE: {k} changed from {v} to {newv[k]}")
    for k in newv:
        if k not in oldv:
            why.append(f"unrecorded: new {k} = {newv[k]}; refresh the baseline in the same commit")
    return why


BANNER = """\
# The plugin ABI of include/hp/backend.h (x86-64, LP64): each struct's size
# and each member's offset, size and type; object-like HP_* macros; typedefs.
# Generated by tools/backend-abi.py write; checked by tests/abi (abi-backend-layout).
# Members only ever append (with a refresh of this file); anything else needs
# a new HP_BACKEND_ABI_VERSION and entry symbol (docs/abi-policy.md).
"""


def main(argv):
    if len(argv) < 3 or argv[0] not in ("dump", "write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, cc, inc = argv[:3]
    lines = measure(cc, inc, os.path.join(inc, HEADER))
    if cmd == "dump":
        print("\n".join(lines))
        return 0
    baseline = argv[3]
    if cmd == "write":
        open(baseline, "w").write(BANNER + "\n".join(lines) + "\n")
        print(f"{baseline}: {sum(l.startswith('struct ') for l in lines)} structs, "
              f"{sum(l.startswith('define ') for l in lines)} macros")
        return 0
    old = [l for l in open(baseline).read().splitlines() if l and not l.startswith("#")]
    if old == lines:
        print(f"{HEADER} matches {baseline} ({len(lines)} lines)")
        return 0
    import difflib
    print(f"{HEADER} differs from {baseline}:")
    for why in explain(old, lines):
        print("  " + why)
    print("diff (baseline -> header):")
    sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
        old, lines, "baseline", "header", lineterm="", n=1))
    if any("HP_BACKEND_ABI_VERSION" in w for w in explain(old, lines)):
        print("HP_BACKEND_ABI_VERSION changed: a new plugin ABI; write its baseline on purpose.")
    print("If the change is a deliberate append, run: "
          f"tools/backend-abi.py write cc include {baseline}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
