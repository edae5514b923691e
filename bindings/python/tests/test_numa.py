"""NUMA placement from Python: node=, nodes=, mode= and hp.block_nodes().

On one node only node 0 can be asked for; the kernel lab's two-node guest
runs the C tests that place blocks on node 1 (tests/kernel/numa.c).
"""

import os

import pytest

import hp
from conftest import nodes_with_memory


@pytest.mark.parametrize("mode", ["prefer", "bind", "interleave"])
def test_placed_block_is_measured_on_its_node(mode):
    node = nodes_with_memory()[-1]
    with hp.alloc(4 << 20, node=node, mode=mode, pool=False) as b:
        b.buf[:] = b"\x01" * len(b)
        info = b.info()
        assert info.numa_mode == mode
        assert info.numa_nodes == (node,)
        where = hp.block_nodes(b)
        assert list(where) == [node] and where[node] >= 4 << 20
        b.resize(8 << 20)
        assert b.info().numa_mode == mode


def test_unplaced_block_reports_default():
    with hp.alloc(1 << 20) as b:
        b[0] = 1
        info = b.info()
        assert info.numa_mode == "default"
        assert len(info.numa_nodes) == 1


def test_bad_placements():
    with pytest.raises(ValueError):
        hp.alloc(4096, node=0, mode="sometimes")
    with pytest.raises(ValueError):
        hp.alloc(4096, node=0, nodes=[0])
    with pytest.raises(ValueError):
        hp.alloc(4096, mode="bind")
    missing = nodes_with_memory()[-1] + 1
    with pytest.raises(hp.InvalidArgumentError, match="has no memory"):
        hp.alloc(4096, node=missing, mode="bind")
    with pytest.raises(hp.InvalidArgumentError):
        hp.alloc(4096, node=5000)


def test_placed_stack():
    node = nodes_with_memory()[-1]
    with hp.stack(1 << 20, node=node, mode="bind") as s:
        assert s.info().mode == "lean"


def test_block_nodes_of_foreign_memory():
    with pytest.raises(hp.ForeignPointerError):
        hp.block_nodes(bytearray(os.urandom(16)))
