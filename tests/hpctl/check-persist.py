#!/usr/bin/env python3
"""hpctl --persist and hpctl persist on a fabricated machine: knobs in a
fabricated /sys tree (HP_SYSFS_ROOT), /etc in a fabricated root (--root).
The default-size pool goes to etc/sysctl.d/80-hpctl.conf, every other knob
to a "w" line of etc/tmpfiles.d/80-hpctl.conf; a set replaces its line;
1 GiB pools and THP modes get their kernel command line; lines hpctl did
not write are kept; another file that wins at boot is named; persist
remove undoes it, file by file; a root that may not be written fails with
exit 3 after the live value was set, and one of hpctl's files that may
not be read is named and left as it was. The real /etc is never touched.

usage: check-persist.py HPCTL   (TAP output)"""
import json
import os
import shutil
import stat
import sys
import tempfile

from hpctltest import done, fake_tree, ok, put, read, run, run_json, skip

P2 = "/sys/kernel/mm/hugepages/hugepages-2048kB/"
P1G = "/sys/kernel/mm/hugepages/hugepages-1048576kB/"
T = "/sys/kernel/mm/transparent_hugepage/"
SYSCTL = "etc/sysctl.d/80-hpctl.conf"
TMPF = "etc/tmpfiles.d/80-hpctl.conf"

sysfs = fake_tree(pools={2048: (64, 60, 0, 0, 0), 1048576: (0, 0, 0, 0, 0)}, nodes=2,
                  mthp={64: "always inherit madvise [never]",
                        2048: "always [inherit] madvise never"})
env = {"HP_SYSFS_ROOT": sysfs}
root = tempfile.mkdtemp(prefix="hpctl-root-", dir="/root" if os.access("/root", os.W_OK)
                        else None)


def lines(rel):
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return [l for l in f.read().splitlines() if l and not l.startswith("#")]


# --- writing ----------------------------------------------------------------
rc, d, err = run_json("pool", "set", "2M", "100", "--persist", "--root", root, env=env)
p = d and d["persisted"]
ok(rc == 0 and read(sysfs, P2[1:] + "nr_hugepages") == "100" and lines(SYSCTL) ==
   ["vm.nr_hugepages = 100"] and p and p[0]["file"] == os.path.join(root, SYSCTL) and
   p[0]["line"] == "vm.nr_hugepages = 100" and p[0]["boot_param"] is None,
   "pool set 2M 100 --persist: set now, vm.nr_hugepages in sysctl.d", (rc, d, err))
mode = stat.S_IMODE(os.stat(os.path.join(root, SYSCTL)).st_mode)
with open(os.path.join(root, SYSCTL)) as f:
    head = f.readline()
ok(mode == 0o644 and head.startswith("# Written by hpctl(1)") and
   not [n for n in os.listdir(os.path.join(root, "etc/sysctl.d")) if n != "80-hpctl.conf"],
   "the file is 0644, says who wrote it, and no temporary file is left", (oct(mode), head))

rc, out, err = run("pool", "set", "2M", "120", "--persist", "--root", root, env=env)
ok(rc == 0 and lines(SYSCTL) == ["vm.nr_hugepages = 120"] and
   "vm.nr_hugepages = 120 (at boot, by systemd-sysctl)" in out,
   "a second set replaces the line", (out, err, lines(SYSCTL)))

rc, out, err = run("pool", "set", "1G", "2", "--persist", "--root", root, env=env)
ok(rc == 0 and lines(TMPF) == ["w %snr_hugepages - - - - 2" % P1G] and
   '"hugepagesz=1G hugepages=2"' in out and "kernel command line" in out,
   "pool set 1G 2 --persist: a tmpfiles.d line, and the kernel command line for 1 GiB pages",
   (out, err, lines(TMPF)))
rc, d, err = run_json("pool", "set", "1G", "1", "--node", "1", "--persist", "--root", root,
                      env=env)
node_knob = "/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages"
ok(rc == 0 and d["persisted"][0]["knob"] == node_knob and
   d["persisted"][0]["boot_param"] == "hugepagesz=1G hugepages=1:1" and
   "w %s - - - - 1" % node_knob in lines(TMPF), "--node: the node's knob, hugepages=NODE:N",
   (d, err, lines(TMPF)))
rc, d, err = run_json("pool", "set", "2M", "--overcommit", "16", "--persist", "--root", root,
                      env=env)
ok(rc == 0 and lines(SYSCTL) == ["vm.nr_hugepages = 120", "vm.nr_overcommit_hugepages = 16"],
   "--overcommit: vm.nr_overcommit_hugepages", (d, err, lines(SYSCTL)))

rc, d, err = run_json("thp", "set", "enabled", "always", "--persist", "--root", root, env=env)
ok(rc == 0 and "w %senabled - - - - always" % T in lines(TMPF) and
   d["persisted"][0]["boot_param"] == "transparent_hugepage=always" and
   read(sysfs, T[1:] + "enabled") == "always",
   "thp set enabled always --persist: tmpfiles.d, transparent_hugepage=always",
   (d, err, lines(TMPF)))
rc, d, err = run_json("mthp", "set", "64K", "enabled", "always", "--persist", "--root", root,
                      env=env)
ok(rc == 0 and "w %shugepages-64kB/enabled - - - - always" % T in lines(TMPF) and
   d["persisted"][0]["boot_param"] == "thp_anon=64K:always",
   "mthp set 64K enabled always --persist: thp_anon=64K:always", (d, err, lines(TMPF)))

before = (lines(SYSCTL), lines(TMPF))
rc, out, err = run("pool", "set", "2M", "7", "--persist", "--root", root, "--dry-run", env=env)
ok(rc == 0 and "would write to %s: vm.nr_hugepages = 7" % os.path.join(root, SYSCTL) in out and
   (lines(SYSCTL), lines(TMPF)) == before and read(sysfs, P2[1:] + "nr_hugepages") == "120",
   "--dry-run --persist writes neither the knob nor the file", (out, err))

# --- bad command lines -------------------------------------------------------
rc, out, err = run("pool", "set", "2M", "5", "--root", root, env=env)
ok(rc == 2 and "--root" in err and read(sysfs, P2[1:] + "nr_hugepages") == "120",
   "--root without --persist: exit 2, nothing set", (rc, out, err))
rc, out, err = run("pool", "set", "2M", "5", "--persist", "--root", "relative/dir", env=env)
ok(rc == 2 and "relative/dir" in err and read(sysfs, P2[1:] + "nr_hugepages") == "120",
   "--root relative: exit 2 naming it, nothing set", (rc, out, err))

# --- listing, status, overrides ----------------------------------------------
rc, d, err = run_json("persist", "--root", root, env=env)
knobs = {e["knob"]: e for e in (d or {}).get("entries", [])}
ok(rc == 0 and len(knobs) == 6 and knobs[P2 + "nr_hugepages"]["value"] == "120" and
   knobs[P2 + "nr_hugepages"]["now"] == "120" and knobs[T + "enabled"]["now"] == "always" and
   all(e["overridden_by"] is None for e in knobs.values()),
   "persist --json: six entries with the values now", (rc, d, err))
rc, d, err = run_json("status", "--root", root, env=env)
ok(rc == 0 and len(d["persistent"]) == 6, "status --json lists what is persistent",
   (rc, d and d.get("persistent"), err))
rc, out, err = run("status", "--root", root, env=env)
ok(rc == 0 and "persistent (applied at every boot):" in out and
   "%snr_hugepages = 120 at boot (now 120" % P2 in out, "status (text) shows them", out)

# Another sysctl file sorted later wins; a tmpfiles file sorted earlier wins.
put(root, "etc/sysctl.d/99-sysctl.conf", "vm.nr_hugepages = 4\n")
put(root, "usr/lib/tmpfiles.d/00-thp.conf", "w %senabled - - - - never\n" % T)
put(root, "usr/lib/sysctl.d/10-early.conf", "vm.nr_hugepages = 2\n")  # loses to hpctl's
rc, d, err = run_json("persist", "--root", root, env=env)
knobs = {e["knob"]: e for e in (d or {}).get("entries", [])}
ok(rc == 0 and knobs[P2 + "nr_hugepages"]["overridden_by"] ==
   os.path.join(root, "etc/sysctl.d/99-sysctl.conf") and knobs[T + "enabled"]["overridden_by"]
   == os.path.join(root, "usr/lib/tmpfiles.d/00-thp.conf") and
   knobs[P2 + "nr_overcommit_hugepages"]["overridden_by"] is None,
   "overridden_by names the file that wins at boot", (rc, d, err))
rc, out, err = run("pool", "set", "2M", "120", "--persist", "--root", root, env=env)
ok(rc == 0 and "warning: %s also sets this" % os.path.join(root, "etc/sysctl.d/99-sysctl.conf")
   in out, "set --persist warns of the file that wins", (out, err))
os.unlink(os.path.join(root, "etc/sysctl.d/99-sysctl.conf"))
os.unlink(os.path.join(root, "usr/lib/tmpfiles.d/00-thp.conf"))

# Lines hpctl did not write stay.
with open(os.path.join(root, SYSCTL), "a") as f:
    f.write("# mine\nkernel.shmmax = 1024\n")
rc, out, err = run("pool", "set", "2M", "130", "--persist", "--root", root, env=env)
ok(rc == 0 and lines(SYSCTL) == ["kernel.shmmax = 1024", "vm.nr_hugepages = 130",
                                 "vm.nr_overcommit_hugepages = 16"] and
   "# mine\n" in open(os.path.join(root, SYSCTL)).read(),
   "a line hpctl did not write is kept", lines(SYSCTL))

# --- removing ----------------------------------------------------------------
rc, out, err = run("persist", "remove", "/sys/no/such/knob", "--root", root, env=env)
ok(rc == 4 and "/sys/no/such/knob" in err and len(lines(SYSCTL)) == 3,
   "persist remove of what is not persistent: exit 4, nothing removed", (rc, out, err))
rc, out, err = run("persist", "remove", "vm.nr_hugepages", "--root", root, "--dry-run", env=env)
ok(rc == 0 and "would remove" in out and len(lines(SYSCTL)) == 3, "remove --dry-run keeps it",
   (out, err))
rc, d, err = run_json("persist", "remove", "vm.nr_hugepages", "--root", root, env=env)
ok(rc == 0 and [e["knob"] for e in d["removed"]] == [P2 + "nr_hugepages"] and
   lines(SYSCTL) == ["kernel.shmmax = 1024", "vm.nr_overcommit_hugepages = 16"] and
   read(sysfs, P2[1:] + "nr_hugepages") == "130",
   "persist remove vm.nr_hugepages: the line goes, the running value stays", (d, err))
rc, out, err = run("persist", "remove", T + "enabled", "--root", root, env=env)
ok(rc == 0 and not any("transparent_hugepage/enabled " in l for l in lines(TMPF)),
   "persist remove by /sys path", (out, err, lines(TMPF)))
rc, out, err = run("persist", "remove", "all", "--root", root, env=env)
ok(rc == 0 and lines(TMPF) is None and lines(SYSCTL) == ["kernel.shmmax = 1024"],
   "persist remove all: hpctl's lines go; a file with nothing else is deleted",
   (out, err, lines(SYSCTL), lines(TMPF)))
rc, d, err = run_json("persist", "--root", root, env=env)
ok(rc == 0 and d["entries"] == [], "nothing is persistent afterwards", d)

# --- a root that may not be written ------------------------------------------
if os.geteuid() != 0:
    skip("as nobody", "needs root to run as nobody")
else:
    tmp = tempfile.mkdtemp(prefix="hpctl-persist-")
    try:
        exe = os.path.join(tmp, "hpctl")
        shutil.copy(sys.argv[1], exe)
        for d, dirs, files in os.walk(sysfs):
            os.chmod(d, 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), 0o666)
        os.chmod(tmp, 0o755)
        os.chmod(exe, 0o755)
        nroot = os.path.join(tmp, "root")
        os.makedirs(os.path.join(nroot, "etc/sysctl.d"))
        os.chmod(nroot, 0o755)
        rc, out, err = run("pool", "set", "2M", "9", "--persist", "--root", nroot, env=env,
                           user="nobody", hpctl=exe)
        ok(rc == 3 and "--persist needs root" in err and
           read(sysfs, P2[1:] + "nr_hugepages") == "9" and
           os.listdir(os.path.join(nroot, "etc/sysctl.d")) == [],
           "as nobody: the live value is set, the file cannot be: exit 3, no stray file",
           (rc, out, err))
        rc, out, err = run("pool", "set", "2M", "9", "--persist", "--root", nroot, "--json",
                           env=env, user="nobody", hpctl=exe)
        doc = json.loads(out) if out.startswith("{") else None
        ok(rc == 3 and doc and doc["status"] == 3 and doc["changes"][0]["status"] == 0,
           "as nobody --json: status 3, the change itself 0", (rc, out, err))
        # One of hpctl's files exists and may not be read: it is named, and
        # nothing is written over it.
        unread = os.path.join(nroot, SYSCTL)
        put(nroot, SYSCTL, "vm.nr_hugepages = 3\n")
        os.chmod(unread, 0o600)
        rc, out, err = run("persist", "--root", nroot, env=env, user="nobody", hpctl=exe)
        ok(rc == 3 and "cannot read %s: Permission denied" % unread in err,
           "persist, a file nobody may read: exit 3 naming it", (rc, out, err))
        rc, out, err = run("persist", "--root", nroot, "--json", env=env, user="nobody",
                           hpctl=exe)
        doc = json.loads(out) if out.startswith("{") else None
        ok(rc == 3 and doc and doc["status"] == 3 and doc["entries"] == [],
           "persist --json, a file nobody may read: status 3", (rc, out, err))
        rc, out, err = run("pool", "set", "2M", "11", "--persist", "--root", nroot, env=env,
                           user="nobody", hpctl=exe)
        ok(rc == 3 and "cannot read %s" % unread in err and
           read(sysfs, P2[1:] + "nr_hugepages") == "11" and
           read(nroot, SYSCTL) == "vm.nr_hugepages = 3" and
           os.listdir(os.path.dirname(unread)) == ["80-hpctl.conf"],
           "--persist over a file nobody may read: set now, the file left as it was, exit 3",
           (rc, out, err))
        rc, out, err = run("persist", "remove", "all", "--root", nroot, env=env, user="nobody",
                           hpctl=exe)
        ok(rc == 3 and "cannot read %s" % unread in err and
           read(nroot, SYSCTL) == "vm.nr_hugepages = 3",
           "persist remove, a file nobody may read: exit 3, the file left as it was",
           (rc, out, err))
    finally:
        shutil.rmtree(tmp, True)
shutil.rmtree(root, True)

# A file that opens but cannot be read (here a directory: read fails with
# EISDIR) is a read error too, not an empty file.
droot = tempfile.mkdtemp(prefix="hpctl-root-")
os.makedirs(os.path.join(droot, TMPF))
rc, out, err = run("persist", "--root", droot, env=env)
ok(rc == 1 and "cannot read %s: Is a directory" % os.path.join(droot, TMPF) in err,
   "persist, a file that cannot be read: exit 1 naming it", (rc, out, err))
rc, out, err = run("thp", "set", "defrag", "defer", "--persist", "--root", droot, env=env)
ok(rc == 1 and "cannot read %s" % os.path.join(droot, TMPF) in err and
   os.path.isdir(os.path.join(droot, TMPF)) and
   not os.path.exists(os.path.join(droot, SYSCTL)),
   "--persist beside a file that cannot be read: exit 1, nothing written", (rc, out, err))
shutil.rmtree(droot, True)
done()
