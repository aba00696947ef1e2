"""The code a run's parameters name (builders' files, a checkout's testers) has a digest that changes with any of
its files, found without importing them."""

import shutil
import sys

from conftest import REPO
from exactness.workbook import named_code


def test_editing_a_checkouts_tester_changes_the_digest(tmp_path):
    checkout = tmp_path / "transformers"
    shutil.copytree(REPO / "tests" / "fixtures" / "transformers_checkout", checkout)
    named = {"transformers_tests": [str(checkout)]}
    before = named_code.digest(named)
    (tester,) = list((checkout / "tests" / "models").glob("*/test_modeling_*.py"))[:1]
    tester.write_text(tester.read_text() + "\n# edited\n")
    assert named_code.digest(named) != before
    assert named_code.digest({}) is None


def test_a_module_builders_package_files_are_its_code_and_nothing_is_imported(tmp_path, monkeypatch):
    package = tmp_path / "mymodels"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('imported')\n")
    (package / "nets.py").write_text("def build(seed):\n    return None\n")
    (package / "helpers.py").write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    named = {"models": ["mymodels.nets:build"]}
    before = named_code.digest(named)
    (package / "helpers.py").write_text("SCALE = 2\n")
    assert named_code.digest(named) != before and "mymodels" not in sys.modules
