import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    paths = ["lib", "tests"]
    result = subprocess.run([ruff, "check", *paths], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
