#!/usr/bin/env python3
"""hpctl run's options as the command sees them (suite hpctl): the preload
and the environment it sets, and bad values refused before anything runs.
What the library then does is tested in tests/malloc."""
import json
import os
import shutil
import stat
import sys
import tempfile

from hpctltest import done, ok, run

# The library, the preload and the HP_STACKS of each --stacks value.
SHOW = ["sh", "-c", 'printf "%s|%s|%s" "$HP_STACKS" "$LD_PRELOAD" "$HP_MALLOC_PAGE_SIZE"']
env = {"HP_STACKS": "", "LD_PRELOAD": ""}
for mode in ("lean", "huge"):
    rc, out, err = run("run", "--stacks", mode, "--", *SHOW, env=env)
    stacks, preload, _ = (out.split("|") + ["", "", ""])[:3]
    ok(rc == 0 and stacks == mode and preload.endswith("libhp-malloc.so"),
       "run --stacks %s: HP_STACKS=%s and libhp-malloc.so preloaded" % (mode, mode),
       "rc %d, out %r, err %r" % (rc, out, err))
rc, out, err = run("run", "--", *SHOW, env=env)
ok(rc == 0 and out.split("|")[0] == "", "run without --stacks leaves HP_STACKS unset",
   "rc %d, out %r" % (rc, out))
rc, out, err = run("run", "--page-size", "2M", "--stacks", "lean", "--", *SHOW, env=env)
ok(rc == 0 and out.split("|")[2] == "2M" and out.split("|")[0] == "lean",
   "run --page-size 2M --stacks lean: both reach the command", "rc %d, out %r" % (rc, out))

for bad, why in ((["--stacks", "giant"], "neither lean nor huge"),
                 (["--stacks", ""], "neither lean nor huge")):
    rc, out, err = run("run", *bad, "--", "sh", "-c", "echo ran")
    ok(rc == 2 and why in err and "ran" not in out,
       "run %s: exit 2 before running anything, says why" % " ".join(bad),
       "rc %d, out %r, err %r" % (rc, out, err))
rc, out, err = run("run", "--stacks")
ok(rc == 2 and "usage: hpctl run" in err and "--stacks needs a value" in err,
   "run --stacks without a value: says so, usage, exit 2", "rc %d, err %r" % (rc, err))
rc, out, err = run("run", "--frob", "--", "true")
ok(rc == 2 and 'unknown option "--frob"' in err, "run --frob: names the option, exit 2",
   "rc %d, err %r" % (rc, err))

# Exit codes of hpctl run itself, apart from 2: 125 could not start, 126
# could not execute, 127 not found; the command's own status otherwise.
rc, out, err = run("run", "--", "true", env={"HP_MALLOC_LIBRARY": "/nonexistent/libhp-malloc.so"})
ok(rc == 125 and "libhp-malloc.so not found" in err,
   "no libhp-malloc.so: exit 125 (not 2), says where it looked", "rc %d, err %r" % (rc, err))
plain = tempfile.NamedTemporaryFile(prefix="hpctl-run-", suffix=".txt")
os.chmod(plain.name, 0o644)
for flags in ([], ["--report"]):
    rc, out, err = run("run", *flags, "--", "/nonexistent/cmd")
    ok(rc == 127 and "No such file" in err, "run %s of a missing command: exit 127" % flags,
       "rc %d, err %r" % (rc, err))
    rc, out, err = run("run", *flags, "--", plain.name)
    ok(rc == 126 and "Permission denied" in err,
       "run %s of a file that is not executable: exit 126" % flags, "rc %d, err %r" % (rc, err))
plain.close()
rc, out, err = run("run", "sh", "-c", "exit 4")
ok(rc == 4, "run without --: CMD starts at the first word that is no option", "rc %d" % rc)

# --report: a process that ends without exit handlers (_exit, as dash's
# exit does) ran the library; the report says that, not "did not run".
rc, out, err = run("run", "--report", "--", sys.executable, "-c", "import os; os._exit(7)")
ok(rc == 7 and "ended without running exit handlers" in err and "did not load" not in err,
   "run --report of a program that calls _exit(7): exit 7, and the report says it ended "
   "without exit handlers", "rc %d, err %r" % (rc, err))
# A process tree: a line per process, each its own figures.
rc, out, err = run("run", "--report", "--", "sh", "-c", "/bin/true; /bin/true; exit 0")
lines = [l for l in err.splitlines() if l.startswith("hpctl run: pid ")]
figures = [l for l in lines if "peak rss" in l]
ok(rc == 0 and len(lines) == 3 and len(figures) >= 2 and
   "3 processes ran libhp-malloc" in err and "not a sum" in err,
   "run --report of a process tree: a line per process, each with its peak rss",
   "rc %d, err %r" % (rc, err))


def static_program(path):
    """No PT_INTERP program header: statically linked (ldconfig on Debian)."""
    import struct
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16)
    except OSError:
        return False
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return all(struct.unpack_from("<I", data, phoff + i * phentsize)[0] != 3
               for i in range(phnum))


LDCONFIG = "/sbin/ldconfig"
if static_program(LDCONFIG):
    rc, out, err = run("run", "--report", "--", LDCONFIG, "--version")
    ok(rc == 0 and "did not load libhp-malloc (statically linked" in err,
       "run --report of a static program: says it did not load the library",
       "rc %d, err %r" % (rc, err))
else:
    ok(True, "run --report of a static program # SKIP %s is not statically linked" % LDCONFIG)

# --report-json FILE: every process, the command's first; stdout untouched.
tmp = tempfile.mkdtemp(prefix="hpctl-run-")
try:
    path = os.path.join(tmp, "r.json")
    rc, out, err = run("run", "--report-json", path, "--", "sh", "-c",
                       "echo hi; python3 -c 'x = bytearray(64 << 20)'; exit 5")
    with open(path) as f:
        doc = json.load(f)
    procs = doc["processes"]
    big = [p for p in procs if p["figures"] and p["large_mib"] and p["large_mib"] >= 64]
    ok(rc == 5 and out == "hi\n" and doc["command"] == "run" and doc["status"] == 5 and
       doc["loaded"] is True and doc["exec_error"] is None and procs[0]["pid"] == doc["pid"] and
       procs[0]["figures"] is False and big and big[0]["peak_rss_mib"] >= 64 and
       big[0]["arenas"] and big[0]["arenas"][0]["page_size"] > 0 and err == "",
       "run --report-json: the document, the shell first (no figures), python's 64M block "
       "with its peak", (rc, out, err, doc))
    rc, out, err = run("run", "--report-json", path, "--", "/nonexistent/cmd")
    with open(path) as f:
        doc = json.load(f)
    ok(rc == 127 and doc["status"] == 127 and doc["exec_error"] == "No such file or directory"
       and doc["loaded"] is False and doc["processes"] == [],
       "run --report-json of a missing command: status 127, exec_error", (rc, err, doc))
    # The report holds the command line, which may hold what only its user
    # should read: FILE is 0600 from its creation (before the command
    # runs) to its replacement, whatever the umask and its mode before.
    fresh = os.path.join(tmp, "fresh.json")
    old_umask = os.umask(0o022)
    try:
        rc, out, err = run("run", "--report-json", fresh, "--", "stat", "-c", "%a", fresh)
        during = out.strip()
        after = oct(stat.S_IMODE(os.stat(fresh).st_mode))
        os.chmod(path, 0o644)
        rc2, _, _ = run("run", "--report-json", path, "--", "true")
        replaced = oct(stat.S_IMODE(os.stat(path).st_mode))
    finally:
        os.umask(old_umask)
    ok(rc == 0 and rc2 == 0 and during == "600" and after == replaced == "0o600",
       "run --report-json FILE: 0600 while the command runs and after, also over a 0644 file",
       (rc, during, after, replaced, err))
    rc, out, err = run("run", "--report-json", os.path.join(tmp, "no", "r.json"), "--", "sh",
                       "-c", "echo ran")
    ok(rc == 125 and "ran" not in out and "cannot write --report-json" in err,
       "run --report-json into a missing directory: exit 125 before running anything",
       (rc, out, err))
finally:
    shutil.rmtree(tmp, True)
done()
