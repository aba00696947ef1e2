"""The browser probe must see what it claims to check: a script error, a broken image, an error output."""

import pytest

from browser import inspect_page

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


def test_probe_catches_script_errors_broken_images_and_error_outputs(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        "<html><head></head><body><script>undefined_function()</script>"
        '<img src="missing.png"><div data-mime-type="application/vnd.jupyter.stderr">Traceback</div></body></html>'
    )
    seen = inspect_page(page)
    assert any("undefined_function" in e for e in seen["errors"])
    assert seen["images"] == [[0, 0, seen["images"][0][2], seen["images"][0][3]]]
    assert seen["error_outputs"] == 1
