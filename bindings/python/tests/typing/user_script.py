"""A user's script, type-checked with ``mypy --strict`` by
tools/ci/stages/45-mypy.sh: the public API must let correct code pass.
It is never run; it only has to type-check."""

import numpy as np
import numpy.typing as npt

import hp
import hp.numpy


def first_bytes(block: hp.Block) -> bytes:
    head: bytes = block[:5]
    return head


def first_int(block: hp.Block) -> int:
    value: int = block[0]
    return value + 1


def arrays() -> float:
    a: npt.NDArray[np.float64] = hp.zeros((1 << 20,), np.float64)
    b = hp.empty(1024, dtype=np.int32, order="F", page_size="2M", pool=True)
    a[:] = 1.0
    return float(a.sum()) + float(b.nbytes)


def infos(block: hp.Block) -> str:
    info: hp.BlockInfo = hp.info(block)
    with hp.stack(1 << 16) as s:
        sinfo: hp.StackInfo = hp.info(s)
        mode: str = sinfo.mode
    arr = hp.zeros(16)
    kind: int = hp.info(arr).page_size
    return f"{info.backend} {mode} {kind}"


def settings() -> None:
    hp.cache_configure(max_bytes=1 << 30)
    hp.cache_configure(idle_ms=500)
    hp.stack_cache_configure(max_stacks=8)
    hp.numpy.install(2 << 20, pool=False)
    with hp.numpy_allocator(min_size=1 << 20, pool=True):
        np.zeros(1 << 20)
    hp.numpy.uninstall()
    installed: bool = hp.numpy.installed()
    print(installed, hp.numpy.stats()["min_size"])


def main() -> None:
    with hp.alloc(4096, exclude=["hugetlbfs"], zero=True, pool=False) as block:
        block[0] = 1
        block[1:3] = b"ab"
        print(first_bytes(block), first_int(block), infos(block))
        block.resize(8192)
    print(arrays())
    settings()


if __name__ == "__main__":
    main()
