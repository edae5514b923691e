#!/usr/bin/env python3
"""The plugin ABI (include/hp/backend.h) matches abi/backend-layout.txt, and
the check really catches what it promises to: a member moved, a struct
shrunk, a member appended without a baseline refresh, a value changed (each
tried on a mutated copy of the header).

usage: check-backend-abi.py CC INCLUDE_DIR BASELINE TOOL   (TAP output)"""
import contextlib
import importlib.util
import io
import os
import re
import shutil
import sys
import tempfile

cc, inc, baseline, tool_path = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("backend_abi", tool_path)
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)

n = 0
failed = False


def report(ok, what, detail=""):
    global n, failed
    n += 1
    failed |= not ok
    print(f"{'ok' if ok else 'not ok'} {n} - {what}")
    for line in detail.splitlines():
        print(f"# {line}")


def run_check(include_dir):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            rc = tool.main(["check", cc, include_dir, baseline])
        except SystemExit as e:  # the tool's own errors (a header it cannot read)
            rc, _ = 2, print(e)
    return rc, out.getvalue()


def mutated(edit):
    """A copy of include/ whose backend.h (comments stripped) went through
    edit(struct_bodies_text) -> text."""
    tmp = tempfile.mkdtemp(prefix="hp-abi-")
    shutil.copytree(inc, os.path.join(tmp, "include"))
    path = os.path.join(tmp, "include", "hp", "backend.h")
    text = tool.strip_comments(open(path).read())
    open(path, "w").write(edit(text))
    return tmp, os.path.join(tmp, "include")


def edit_struct(name, fn):
    """Edit the member declarations (a list of strings) of struct name."""
    def edit(text):
        m = re.search(r"(\bstruct\s+" + name + r"\s*\{)([^{}]*)(\}\s*;)", text)
        decls = [d.strip() for d in m.group(2).split(";") if d.strip()]
        body = "\n".join(f"    {d};" for d in fn(decls)) + "\n"
        return text[:m.start(2)] + body + text[m.end(2):]
    return edit


print("1..6")
print(f"# compiler {cc}, header {inc}/hp/backend.h, baseline {baseline}")
rc, out = run_check(inc)
report(rc == 0, "include/hp/backend.h matches abi/backend-layout.txt", "" if rc == 0 else out)

lines = open(baseline).read()
report("define HP_BACKEND_ENTRY_NAME = " in lines and "struct hp_backend_ops size=" in lines
       and "struct hp_host size=" in lines,
       "the baseline pins the entry symbol, the descriptor and the upcall table")

cases = [
    ("swapping two members of struct hp_mapping is caught as a move",
     edit_struct("hp_mapping", lambda d: d[:2] + [d[3], d[2]] + d[4:]),
     r"INCOMPATIBLE: hp_mapping\.\w+ moved from offset"),
    ("dropping the last member of struct hp_backend_ops is caught as a shrink",
     edit_struct("hp_backend_ops", lambda d: d[:-1]),
     r"INCOMPATIBLE: struct hp_backend_ops shrank"),
    ("a member appended to struct hp_host fails until the baseline is refreshed",
     edit_struct("hp_host", lambda d: d + ["uint64_t appended_for_the_test"]),
     r"unrecorded: hp_host\.appended_for_the_test appended at offset"),
    ("a changed HP_ value is caught",
     lambda t: re.sub(r"(#define HP_PAGE_ADVISED\s+)0x2u", r"\g<1>0x20u", t),
     r"INCOMPATIBLE: define HP_PAGE_ADVISED changed from 2 to 32"),
]
for what, edit, expect in cases:
    tmp, include_dir = mutated(edit)
    try:
        rc, out = run_check(include_dir)
    finally:
        shutil.rmtree(tmp)
    ok = rc == 1 and re.search(expect, out) is not None and "diff (baseline -> header)" in out
    report(ok, what, out if not ok else out.splitlines()[1])
sys.exit(1 if failed else 0)
