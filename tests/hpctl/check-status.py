"""hpctl status: every backend's path and description, and a bad HP_*
variable reported as the HP_EENV every call would get, instead of a list of
backends that no call can use."""
import os
import shutil
import tempfile

from hpctltest import HPCTL, done, ok, run, run_json

builtin_dir = os.environ["HP_BACKEND_DIR"]

rc, st, err = run_json("status")
ok(rc == 0 and st is not None and st.get("error", "missing") is None,
   "status --json: exit 0, error null", "%r %r" % (rc, err))
backends = st["backends"] if st else []
ok(all("path" in b and "description" in b for b in backends),
   "every backend has path and description", backends)
by_name = {b["name"]: b for b in backends if not b["reason"].startswith("rejected")}
fb = by_name.get("fallback", {})
ok(fb.get("path") in ("builtin", builtin_dir + "/fallback.so") and fb.get("description"),
   "the fallback is a built-in, with its description", fb)
thp = by_name.get("thp-madvise", {})
ok(os.path.dirname(thp.get("path", "")) == builtin_dir and thp.get("description"),
   "thp-madvise comes from HP_BACKEND_DIR, with its description", thp)

rc, out, err = run("status")
ok(rc == 0 and ("%s/fallback.so: " % builtin_dir) in out and
   ("%s/thp-madvise.so: " % builtin_dir) in out,
   "status (text) shows each backend's path and description", out)

# A file refused before its name could be read (not an ELF file): its row
# says "-" for the name, as for anything else it has not got, never "?"
# (which reads as a name that was garbled).
plugins = tempfile.mkdtemp(dir=os.path.dirname(builtin_dir))
try:
    with open(os.path.join(plugins, "garbage.so"), "w") as f:
        f.write("not an ELF file\n")
    rc, out, err = run("status", env={"HP_BACKEND_PATH": plugins})
    rows = out.splitlines()
    row = next((i for i, r in enumerate(rows) if "rejected" in r and i + 1 < len(rows) and
                rows[i + 1].strip().startswith(plugins + "/garbage.so")), None)
    ok(rc == 0 and row is not None and rows[row].split()[0] == "-",
       "status (text): a file refused before its name was read shows \"-\" as its name",
       out + err)
finally:
    shutil.rmtree(plugins)

# A plugin file whose name holds terminal controls: neither hpctl status
# nor libhp's debug log lets them through (no forged "libhp:" line).
plugins = tempfile.mkdtemp(dir=os.path.dirname(builtin_dir))
evil = "x\x1b[2J\x1b[31mEVIL\nlibhp: forged\x07.so"
try:
    with open(os.path.join(plugins, evil), "w") as f:
        f.write("not an ELF file\n")
    rc, out, err = run("status", env={"HP_BACKEND_PATH": plugins, "HP_DEBUG": "1"})
    controls = [c for c in "\x1b\x07\r" if c in out + err]
    ok(rc == 0 and not controls and "EVIL" in out and
       not any(line.startswith("libhp: forged") for line in (out + err).splitlines()),
       "status with HP_DEBUG=1: a plugin file name's ESC, LF and BEL reach neither the table "
       "nor the log", repr(out + err))
finally:
    shutil.rmtree(plugins)

for bad, want in (("relative/plugins", 'entry 1 ("relative/plugins") is not an absolute path'),
                  ("/opt/hp::/usr/hp", 'entry 2 ("") is empty')):
    env = {"HP_BACKEND_PATH": bad}
    rc, st, err = run_json("status", env=env)
    error = (st or {}).get("error") or {}
    ok(rc == 1 and error.get("code") == "HP_EENV" and want in error.get("detail", ""),
       "HP_BACKEND_PATH=%s: status --json says HP_EENV, exit 1" % bad, "%r %r %r" % (rc, st, err))
    paths = [b["path"] for b in (st or {}).get("backends", [])]
    ok(not any(p.startswith(builtin_dir + "/") for p in paths),
       "HP_BACKEND_PATH=%s: no plugin of the default directory is listed" % bad, paths)
    rc, out, err = run("status", env=env)
    ok(rc == 1 and out.startswith("libhp ") and ("\nerror: HP_EENV: " in out) and want in out,
       "HP_BACKEND_PATH=%s: status (text) says HP_EENV first" % bad, out)
done()
