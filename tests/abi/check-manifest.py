#!/usr/bin/env python3
"""abi/functions.txt == the prototypes in include/hp.h == the version script.

usage: check-manifest.py CC INCLUDE_DIR MANIFEST VERSION_SCRIPT   (TAP output)"""
import re
import subprocess
import sys

cc, inc, manifest, script = sys.argv[1:5]

C_TYPES = {
    "void": "void", "int32_t": "i32", "uint32_t": "u32", "uint64_t": "u64", "size_t": "size",
    "const char *": "str", "void *": "ptr", "const void *": "cptr",
}


def classify(ctype):
    t = " ".join(ctype.replace("*", " * ").split()).replace(" *", " *").replace("* ", "*")
    t = re.sub(r"\s*\*\s*", " *", t).strip()
    if t in C_TYPES:
        return C_TYPES[t]
    if t.endswith("*"):
        return "cptr" if t.startswith("const ") else "ptr"
    raise SystemExit(f"unknown C type {ctype!r}")


def header_prototypes():
    src = subprocess.run([cc, "-E", "-P", "-I", inc, "-x", "c", "-"], input="#include <hp.h>\n",
                         capture_output=True, text=True, check=True).stdout
    src = " ".join(src.split())
    protos = {}
    # Parameters may be function pointers: one level of nested parentheses.
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(hp_\w+)\s*\(((?:[^()]|\([^()]*\))*)\)\s*;", src):
        ret, name, params = m.groups()
        ret = ret.split(";")[-1].split("}")[-1]
        types = []
        if params.strip() != "void":
            for p in re.split(r",(?![^()]*\))", params):
                p = p.strip()
                if "(*" in p:
                    types.append("ptr")
                    continue
                pm = re.match(r"(.*?)(\w+)$", p)
                types.append(classify(pm.group(1)))
        protos[name] = [classify(ret.strip())] + types
    return protos


def manifest_entries():
    entries = {}
    for line in open(manifest):
        line = line.split("#")[0].split()
        if line:
            entries[line[0]] = line[1:]
    return entries


def script_names():
    return set(re.findall(r"^\s*(hp_\w+)\s*;", open(script).read(), re.M))


header, mani, names = header_prototypes(), manifest_entries(), script_names()
checks = [
    ("manifest names == header prototypes", set(mani) == set(header),
     set(mani) ^ set(header)),
    ("manifest names == version script", set(mani) == names, set(mani) ^ names),
    ("manifest signatures == header signatures",
     all(mani[n] == header.get(n) for n in mani),
     {n: (mani[n], header.get(n)) for n in mani if mani[n] != header.get(n)}),
]
print(f"1..{len(checks)}")
bad = 0
for i, (what, ok, diff) in enumerate(checks, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
    if not ok:
        bad = 1
        print(f"# difference: {diff}")
sys.exit(bad)
