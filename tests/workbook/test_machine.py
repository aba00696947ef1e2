import json
import subprocess
import sys

import numpy as np

from exactness.workbook import machine


def test_float32_spacing_agrees_with_numpy():
    table = machine.float_spacing([1e-3, 1.0, 1e3])
    assert table.float32.tolist() == [float(np.spacing(np.float32(m))) for m in (1e-3, 1.0, 1e3)]
    assert table.float64.tolist() == [float(np.spacing(np.float64(m))) for m in (1e-3, 1.0, 1e3)]
    assert table.loc[1, "float16"] == 2.0**-10 and table.loc[1, "bfloat16"] == 2.0**-7


def test_machine_facts_have_the_fields_a_manifest_needs(tmp_path):
    facts = machine.run_facts(tmp_path)
    assert facts["versions"]["torch"].startswith("2.13.0")
    assert facts["logical_cpus"] >= 1 and facts["cpu_model"]
    assert facts["git_commit"] is None  # tmp_path is not a repository


def test_run_facts_count_threads_without_loading_torch_into_the_caller(tmp_path):
    code = ("import json, sys; from pathlib import Path; from exactness.workbook.machine import run_facts; "
            f"facts = run_facts(Path({str(tmp_path)!r})); "
            "print(json.dumps([facts['threads'], sorted({'torch', 'onnxruntime'} & set(sys.modules))]))")
    threads, loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                check=True).stdout.strip().splitlines()[-1])
    assert loaded == []
    # Counted in a process of its own: a test run earlier in this worker may have set torch's thread count.
    fresh = subprocess.run([sys.executable, "-c", "import json, torch; print(json.dumps([torch.get_num_threads(), "
                            "torch.get_num_interop_threads()]))"], capture_output=True, text=True, check=True)
    intra, inter = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert (threads["torch_intra_op_threads"], threads["torch_inter_op_threads"]) == (intra, inter)
    assert threads["ort_intra_op_threads_setting"] == threads["ort_inter_op_threads_setting"] == 0


def test_a_batch_of_runs_reads_the_thread_counts_in_one_process(tmp_path, monkeypatch):
    machine.thread_counts_apart.cache_clear()
    started = []
    real_run = subprocess.run
    monkeypatch.setattr(machine.subprocess, "run", lambda command, **k: started.append(command)
                        or real_run(command, **k))
    first, second = machine.run_facts(tmp_path), machine.run_facts(tmp_path)
    assert [c[0] for c in started].count(sys.executable) == 1  # git may run too: only Python processes count
    first["threads"]["torch_intra_op_threads"] = -1  # one run's facts are its own to change
    assert second["threads"] == machine.thread_counts_apart() != first["threads"]
    machine.thread_counts_apart.cache_clear()


def test_denormal_probe_answers_for_every_runtime():
    behaviour = machine.denormal_behaviour()
    assert set(behaviour) == {"numpy_keeps_subnormals", "torch_keeps_subnormals", "ort_keeps_subnormals"}
    assert all(isinstance(v, bool) for v in behaviour.values())
