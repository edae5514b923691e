#!/usr/bin/env python3
"""hpctl run's options as the command sees them (suite hpctl): the preload
and the environment it sets, and bad values refused before anything runs.
What the library then does is tested in tests/malloc."""
import os

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
ok(rc == 2 and "usage: hpctl run" in err, "run --stacks without a value: usage, exit 2",
   "rc %d, err %r" % (rc, err))
done()
