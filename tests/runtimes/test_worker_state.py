from exactness.runtimes import worker_state


def test_a_factory_runs_once_per_key_and_a_fresh_state_starts_empty():
    calls = []

    def make(model):
        calls.append(model)
        return object()

    with worker_state.fresh() as state:
        first = state.made_by(make, "A")
        assert state.made_by(make, "A") is first and calls == ["A"]
        assert state.made_by(make, "B") is not first and calls == ["A", "B"]
        with worker_state.fresh() as inner:
            assert worker_state.current() is inner and inner.made_by(make, "A") is not first
        assert worker_state.current() is state
    assert worker_state.current() is not state

