"""python3 -m hp [--json]: what libhp sees on this machine."""

import argparse
import json
import sys
from typing import List, Optional


def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m hp", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print hp.status() as JSON")
    args = parser.parse_args(argv)
    # `python3 -m hp` imports the package before this module runs, so a
    # missing libhp is reported by runpy as one line (hp._lib raises an
    # ImportError naming the package); this covers main() called directly.
    try:
        import hp
    except ImportError as exc:
        print(exc, file=sys.stderr)
        return 1
    st = hp.status()
    if args.json:
        json.dump(st, sys.stdout, indent=2)
        print()
        return 0
    print(f"libhp {st['version']} from {st['library']} (bindings {st['binding_version']}; "
          f"looked at {', '.join(st['library_search'])})")
    print(f"plugins from {st['plugin_dir'] or '(none)'} ({st['plugin_dir_source']})")
    print(f"huge pages: {', '.join(st['huge_page_backends']) or 'none available'}")
    for warning in st["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print()
    print(f"{'backend':<14} {'kind':<8} {'avail':<6} {'page sizes (free pool pages)':<30} reason")
    for b in st["backends"]:
        sizes = " ".join(
            _size(s) + (f"({free})" if free is not None else "")
            for s, free in zip(b["page_sizes"], b["pool_free"])) or "-"
        print(f"{b['name'] or '-':<14} {str(b['kind']):<8} {'yes' if b['available'] else 'no':<6} "
              f"{sizes:<30} {b['reason']}")
    env = st["environment"]
    print()
    print("environment: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "no HP_* variables"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
