"""Shared helpers for the hpctl tests: TAP output, running hpctl, fabricated
/sys trees (HP_SYSFS_ROOT), and kernel knobs that are restored whatever
happens, under the machine-wide knob lock (as tests/support does in C)."""
import atexit
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HPCTL = sys.argv[1] if len(sys.argv) > 1 else "hpctl"
_n = 0
_failed = 0


def ok(cond, name, detail=""):
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
        for line in str(detail).splitlines():
            print("# " + line)
    print(("ok" if cond else "not ok") + " %d - %s" % (_n, name))
    sys.stdout.flush()
    return cond


def skip(name, why):
    global _n
    _n += 1
    print("ok %d - %s # SKIP %s" % (_n, name, why))


def done():
    print("1..%d" % _n)
    sys.exit(1 if _failed else 0)


def run(*args, env=None, user=None, hpctl=None):
    """Run hpctl; returns (exit code, stdout, stderr)."""
    cmd = [hpctl or HPCTL] + list(args)
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stdout, p.stderr


def run_json(*args, env=None):
    rc, out, err = run(*args, "--json", env=env)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, "not JSON: %r; stderr %r" % (out, err)


# --- fabricated trees -------------------------------------------------------

def put(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fake_tree(pools=None, thp="always [madvise] never", mthp=None, nodes=1):
    """A /sys and /proc tree: pools {kb: (total, free, resv, surplus, overcommit)},
    mthp {kb: enabled choice line}. Removed at exit."""
    root = tempfile.mkdtemp(prefix="hpctl-sysfs-")
    atexit.register(shutil.rmtree, root, True)
    pools = {2048: (0, 0, 0, 0, 0)} if pools is None else pools
    names = ["nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages",
             "nr_overcommit_hugepages"]
    for kb, vals in pools.items():
        for name, v in zip(names, vals):
            put(root, "sys/kernel/mm/hugepages/hugepages-%dkB/%s" % (kb, name), "%d\n" % v)
        for node in range(nodes):
            d = "sys/devices/system/node/node%d/hugepages/hugepages-%dkB/" % (node, kb)
            put(root, d + "nr_hugepages", "%d\n" % (vals[0] // nodes))
            put(root, d + "free_hugepages", "%d\n" % (vals[1] // nodes))
            put(root, d + "surplus_hugepages", "0\n")
    t = "sys/kernel/mm/transparent_hugepage/"
    if thp is not None:
        put(root, t + "enabled", thp + "\n")
        put(root, t + "defrag", "always defer defer+madvise [madvise] never\n")
        put(root, t + "hpage_pmd_size", "2097152\n")
        for kb, line in (mthp or {}).items():
            put(root, t + "hugepages-%dkB/enabled" % kb, line + "\n")
            put(root, t + "hugepages-%dkB/shmem_enabled" % kb,
                "always inherit within_size advise [never]\n")
            put(root, t + "hugepages-%dkB/stats/nr_anon" % kb, "3\n")
            put(root, t + "hugepages-%dkB/stats/anon_fault_alloc" % kb, "17\n")
    default_kb = min(pools) if pools else 2048
    tot, free = pools.get(default_kb, (0, 0))[:2]
    hugetlb_kb = sum(kb * v[0] for kb, v in pools.items())
    put(root, "proc/meminfo",
        "MemTotal: 24000000 kB\nAnonHugePages: 4096 kB\nHugePages_Total: %d\n"
        "HugePages_Free: %d\nHugepagesize: %d kB\nHugetlb: %d kB\n"
        % (tot, free, default_kb, hugetlb_kb))
    put(root, "proc/vmstat", "pgfault 1000\npgmajfault 2\nthp_fault_alloc 5\n")
    put(root, "proc/mounts", "proc /proc proc rw 0 0\n")
    put(root, "proc/self/cgroup", "0::/\n")
    return root


def read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read().strip()


# --- real knobs --------------------------------------------------------------

_saved = []
_lock_fd = None


def knob_lock():
    global _lock_fd
    if _lock_fd is not None:
        return
    for path in ("/run/lock/libhp-knobs.lock", "/tmp/libhp-knobs.lock"):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            break
        except OSError:
            fd = None
    fcntl.flock(fd, fcntl.LOCK_EX)
    _lock_fd = fd
    _save_undo()


# hpctl records what each set on real knobs replaced (/run/hpctl/undo, for
# hpctl undo); a test's sets must not stay there, so the record is kept
# as it was found, under the knob lock, and put back by restore().
UNDO = "/run/hpctl/undo"
_undo = []


def _save_undo():
    had_dir = os.path.isdir(os.path.dirname(UNDO))
    try:
        with open(UNDO) as f:
            _undo.append((f.read(), had_dir))
    except OSError:
        _undo.append((None, had_dir))


def _restore_undo():
    if not _undo:
        return
    text, had_dir = _undo[0]
    try:
        if text is None:
            if os.path.exists(UNDO):
                os.remove(UNDO)
            if not had_dir and os.path.isdir(os.path.dirname(UNDO)):
                os.rmdir(os.path.dirname(UNDO))
        else:
            with open(UNDO, "w") as f:
                f.write(text)
    except OSError as e:
        print("# could not restore %s: %s" % (UNDO, e))


def _selected(text):
    if "[" in text and "]" in text:
        return text[text.index("[") + 1:text.index("]")]
    return text


def knob_get(path):
    with open(path) as f:
        return f.read().strip()


def knob_save(path):
    """Remember path's value (once); it is written back by restore()."""
    knob_lock()
    if all(p != path for p, _ in _saved):
        _saved.append((path, _selected(knob_get(path))))


def restore():
    for path, value in reversed(_saved):
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as e:
            print("# could not restore %s to %s: %s" % (path, value, e))
    _saved.clear()
    _restore_undo()


def _on_signal(sig, frame):
    restore()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


atexit.register(restore)
for _s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_s, _on_signal)


def meminfo(name):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return None
