#!/usr/bin/env python3
"""Print "PASSED FAILED" for a meson testlog.json (subtests count one each)."""
import json, sys

passed = failed = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["result"] in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"):
        failed += 1
    elif r["result"] == "OK":
        passed += 1
print(passed, failed)
