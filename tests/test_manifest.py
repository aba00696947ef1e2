import json

from exactness.manifest import Manifest


def test_manifest_round_trips_and_ignores_unknown_fields(tmp_path):
    manifest = Manifest(study="s", run_id="r", param_set="p", params={"a": [1, 2]}, batch="b", duration_s=1.5)
    manifest.write(tmp_path)
    data = json.loads((tmp_path / "manifest.json").read_text())
    data["added_later"] = True
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    assert Manifest.read(tmp_path) == manifest
    assert not list(tmp_path.glob("*.tmp"))
