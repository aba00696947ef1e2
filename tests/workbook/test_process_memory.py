import os
import subprocess
import sys

from exactness.workbook.process_memory import TreeMemory, tree_rss_bytes

_HOLD = "import sys, time; block = bytearray(150 * 2**20); block[::4096] = b'x' * len(block[::4096]); " \
        "print('ready', flush=True); sys.stdin.readline()"


def test_the_peak_counts_memory_held_by_child_processes():
    alone = tree_rss_bytes(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", _HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with TreeMemory(os.getpid(), every=0.05) as memory:
            assert child.stdout.readline().strip() == "ready"
            import time

            time.sleep(0.3)
    finally:
        child.communicate("\n")
    assert memory.peak - alone > 140 * 2**20, (memory.peak, alone)
