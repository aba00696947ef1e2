import subprocess
import sys

_FORWARDS = """
import resource, sys, torch
if sys.argv[1] == "keep":
    from exactness.workbook.allocator import keep_freed_memory
    assert keep_freed_memory()
from exactness.models import wav2vec2_family as family
from exactness.runtimes import eager_capture
torch.set_num_threads(1)
model = "UniSpeechForPreTraining"  # its quantizer forward makes a 150 MB temporary
built, inputs = family.build_model(model, 3), family.tester_inputs(model, 3)
eager_capture.run(built, inputs, capture=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    outputs = eager_capture.run(built, inputs, capture=False).outputs
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
torch.save(outputs, sys.argv[2])
"""


def _faults_and_outputs(mode, tmp_path):
    import torch

    path = tmp_path / f"{mode}.pt"
    out = subprocess.run([sys.executable, "-c", _FORWARDS, mode, str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]), torch.load(path)


def test_freed_blocks_are_reused_instead_of_faulted_in_again_with_the_same_outputs(tmp_path):
    plain_faults, plain = _faults_and_outputs("plain", tmp_path)
    kept_faults, kept = _faults_and_outputs("keep", tmp_path)
    assert plain.keys() == kept.keys() and all(plain[k].equal(kept[k]) for k in plain)
    assert plain_faults > 4 * 30_000  # each forward faults its 150 MB temporary in again
    assert kept_faults < plain_faults / 2, (kept_faults, plain_faults)
