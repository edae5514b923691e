#!/usr/bin/env python3
"""hpctl's usage text and the SYNOPSIS of hpctl(1) say the same: for every
subcommand, the same options (every --word), the same positional words,
and "[--]" where the usage has it. Exit codes are those hpctl.h defines.

usage: check-usage.py HPCTL HPCTL_1_SCD HPCTL_H   (TAP output)"""
import re
import sys

from hpctltest import done, ok, run

man = open(sys.argv[2]).read()
synopsis = man.split("# SYNOPSIS", 1)[1].split("# DESCRIPTION", 1)[0]
rc, out, err = run("--help")
ok(rc == 0 and err.startswith("usage: hpctl "), "hpctl --help: the usage, exit 0", (rc, err))


def words(text):
    """Options and literal words, without scdoc markup or placeholders."""
    text = re.sub(r"[*_\[\]|.+]", " ", text)
    return {w for w in text.split() if w.startswith("--") or w.islower()} - {"hpctl"}


usage = {}
for line in err.splitlines():
    line = re.sub(r"^(usage:)?\s*hpctl ", "", line)
    for part in line.split(" | "):
        part = part.strip()
        usage.setdefault(part.split()[0], set()).update(words(part))
man_cmds = {}
for line in synopsis.splitlines():
    m = re.match(r"\*hpctl (\w+)", line)
    if m:
        man_cmds.setdefault(m.group(1), set()).update(words(line))
ok(sorted(usage) == sorted(man_cmds), "the same subcommands",
   (sorted(usage), sorted(man_cmds)))
for cmd in sorted(usage):
    a, b = usage[cmd], man_cmds.get(cmd, set())
    ok(a == b, "%s: usage and SYNOPSIS name the same words" % cmd,
       "only in usage: %s; only in the man page: %s" % (sorted(a - b), sorted(b - a)))
run_usage = [l for l in err.splitlines() if "hpctl run " in l][0]
ok("[--] CMD" in run_usage and "[*--*] _CMD_" in synopsis, "run: [--] in both", run_usage)

# Every exit code of hpctl.h is in the man page's EXIT STATUS table.
codes = {int(v) for v in re.findall(r"HPCTL_\w+ = (\d+)", open(sys.argv[3]).read())}
table = man.split("# EXIT STATUS", 1)[1].split("\n# ", 1)[0]
listed = {int(v) for v in re.findall(r"\*(\d+)\*", table)}
ok(codes and codes <= listed and {125, 126, 127} <= listed,
   "EXIT STATUS lists every code of hpctl.h and run's 125-127", (codes, listed))
done()
