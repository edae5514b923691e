"""Random sequences of alloc / view / numpy / resize / close / drop, checked
against a model, in a child process so that a crash shows up as a signal."""

import gc
import random
import signal
from pathlib import Path

import pytest

from conftest import run_python


def workload(seed, steps=1500):
    import hp
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    rng = random.Random(seed)
    blocks = []      # [block, views, tag]
    orphans = []     # (views, tag) whose block was dropped
    for step in range(steps):
        op = rng.choice("aavvnrrcdxk" if blocks else "a")
        if op == "a":
            size = rng.choice([1, 4095, 4096, 65536, 1 << 20, 3 << 20])
            b = hp.alloc(size, backend=rng.choice(["fallback", None]))
            tag = rng.randrange(1, 256)
            with b.buf as v:
                v[0] = tag
            blocks.append([b, [], tag])
            continue
        entry = rng.choice(blocks)
        b, views, tag = entry
        if b.closed:
            for use in (len, lambda b: b.info(), lambda b: b.resize(4096)):
                try:
                    use(b)
                    raise AssertionError("closed block usable")
                except hp.ClosedError:
                    pass
            try:
                b.buf
                raise AssertionError("closed block exported")
            except ValueError:
                pass
            blocks.remove(entry)
        elif op == "v":
            views.append(b.buf[0:rng.randint(1, len(b))])
        elif op == "n" and np is not None:
            if rng.random() < 0.5:
                views.append(np.frombuffer(b.buf, dtype=np.uint8))
            else:
                views.append(np.ndarray((len(b),), np.uint8, buffer=b.buf))
            try:
                np.ndarray((len(b),), np.uint8, buffer=b)
                raise AssertionError("the Block itself exported a buffer")
            except TypeError:
                pass
        elif op == "x" and views:
            v = views.pop(rng.randrange(len(views)))
            if isinstance(v, memoryview):
                v.release()
        elif op in "rc":
            try:
                if op == "r":
                    b.resize(rng.choice([1, 4096, 100000, 2 << 20, 9 << 20]))
                else:
                    b.close()
                assert not views, "changed with live views"
            except BufferError:
                assert views, "BufferError without views"
            if not b.closed:
                with b.buf as v:
                    assert v[0] == tag, "contents lost"
        elif op == "d":
            blocks.remove(entry)
            orphans.append((views, tag))
            del b, entry
        elif op == "k":
            views.clear()
        for views_, tag_ in orphans:
            for v in views_:
                assert v[0] == tag_, "orphaned view lost its memory"
        if step % 100 == 0:
            orphans = [o for o in orphans if rng.random() < 0.5]
            gc.collect()
    for b, views, _ in blocks:
        views.clear()
        b.close()
    print("ok", seed)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_operations_never_crash(seed):
    here = str(Path(__file__).parent)
    proc = run_python(f"import sys; sys.path.insert(0, {here!r}); "
                      f"import test_random_ops; test_random_ops.workload({seed})")
    if proc.returncode < 0:
        pytest.fail(f"child died of {signal.Signals(-proc.returncode).name}:\n{proc.stderr}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ok {seed}"
