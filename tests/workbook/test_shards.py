import pickle

import pandas as pd
import pytest

from exactness.workbook.shards import ShardError, ShardStore


def test_a_saved_chunk_loads_back_equal(tmp_path):
    store = ShardStore(tmp_path / "shards")
    frame = pd.DataFrame({"seed": [3, 4], "gap": [1e-6, 2e-7]})
    key = store.key("screen Wav2Vec2ForPreTraining", [3, 4])
    assert not store.has(key)
    store.save(key, frame)
    assert store.has(key) and store.keys() == [key]
    pd.testing.assert_frame_equal(store.load(key), frame)


def test_keys_name_the_sweep_and_the_chunk_and_differ_between_chunks():
    key = ShardStore.key("check Wav2Vec2ForPreTraining dynamic", [10, 11, 12])
    assert key == "check_Wav2Vec2ForPreTraining_dynamic--10-12-n3"
    assert key != ShardStore.key("check Wav2Vec2ForPreTraining dynamic", [10, 12])
    assert key != ShardStore.key("check Wav2Vec2ForPreTraining static", [10, 11, 12])


def test_items_that_look_like_paths_still_make_one_file(tmp_path):
    store = ShardStore(tmp_path)
    key = store.key("exports", ["UniSpeechForPreTraining/dynamic", "../up"])
    store.save(key, [1])
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.pkl"] and store.load(key) == [1]


def test_a_half_written_shard_is_not_a_shard(tmp_path):
    store = ShardStore(tmp_path)
    key = store.key("sweep", [0, 1])
    (tmp_path / f"{key}.partial-123").write_bytes(b"\x80\x04 half")  # what a kill during the write leaves
    assert not store.has(key) and store.keys() == []


def test_an_unreadable_shard_is_named_with_what_to_do(tmp_path):
    store = ShardStore(tmp_path)
    key = store.key("sweep", [0, 1])
    (tmp_path / f"{key}.pkl").write_bytes(pickle.dumps([1, 2])[:5])
    with pytest.raises(ShardError, match=rf"{key}\.pkl cannot be read .*delete it"):
        store.load(key)


def test_any_single_changed_byte_is_refused_never_loaded_as_other_values(tmp_path):
    import pandas as pd

    store = ShardStore(tmp_path)
    key = store.key("screen", [0, 99])
    path = store.save(key, pd.DataFrame({"seed": range(100), "gap": [i * 1e-6 for i in range(100)]}))
    original = path.read_bytes()
    for position in range(0, len(original), max(1, len(original) // 200)):
        damaged = bytearray(original)
        damaged[position] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(ShardError, match="delete it"):
            store.load(key)


def test_a_shard_renamed_to_another_chunk_is_refused(tmp_path):
    store = ShardStore(tmp_path)
    first, second = store.key("sweep", [0, 1]), store.key("sweep", [2, 3])
    store.save(first, [0, 1])
    (tmp_path / f"{first}.pkl").rename(tmp_path / f"{second}.pkl")
    with pytest.raises(ShardError, match="chunk name does not match"):
        store.load(second)
