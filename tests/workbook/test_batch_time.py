"""The whole batch's time left: the last runs' durations of the studies still to run, falling as they finish."""

from exactness.workbook import batch_time


def test_the_estimate_sums_the_studies_left_and_names_those_never_timed():
    durations = {("environment", "default"): 6.0, ("discrete_ops", "default"): 576.0, ("near_tie", "default"): 60.0}
    batch = [("environment", "default"), ("discrete_ops", "default"), ("near_tie", "default"), ("ulp_noise", "default")]
    first = batch_time.left(batch, durations)
    assert first == ("batch: about 11 min left (from the last runs of these studies), plus ulp_noise, never run with "
                     "these parameters")
    assert batch_time.left(batch[2:3], durations) == "batch: about 60 s left (from the last runs of these studies)"
    assert batch_time.left(batch[3:], durations).startswith("batch: no estimate yet")
