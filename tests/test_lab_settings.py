"""`make lab`'s JupyterLab asks nothing on open: the news announcement plugin is off (etc/jupyter/labconfig)."""

from conftest import REPO


def test_the_news_pop_up_is_disabled_where_make_lab_looks_for_page_config(monkeypatch, tmp_path):
    from jupyterlab_server.config import get_static_page_config

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(REPO / "etc" / "jupyter"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path))  # no user's own config in the way
    disabled = get_static_page_config(level="all").get("disabledExtensions", {})
    assert disabled.get("@jupyterlab/apputils-extension:announcements") is True
