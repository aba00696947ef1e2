"""The GPU command: the near-tie study's precision pairs and the DAC chain on CUDA, beside their CPU emulation.

    python -m exactness.gpu --out DIR [--seeds 19885] [--workers 15]

Runs under a machine's own torch and transformers (no papermill, no Jupyter): it needs torch with CUDA,
transformers, pandas and pyarrow. It writes into DIR what a near_tie run reads back with `-p gpu_run DIR`:

- machine.json: the GPU, versions, torch's TF32 defaults, what each part ran (and any error), and the proofs: the
  fast path's logits against a plain build's on CUDA, the perplexity from CUDA's codes against the model's own;
- tf32_probe.csv: which kinds of convolution and product change when TF32 is allowed (cuDNN's choice, which the
  emulation assumes);
- pairs.parquet, noise_law.parquet, smallest_gaps.parquet: the conformer under every pair, seed by seed, and what
  its prediction needs (the summary is made where the folder is read back);
- dac_chain.csv: the DAC fix's comparison, layer by layer, in float32 and TF32, on the CPU and on CUDA.

Every part stops starting new pairs at its deadline and records what it skipped.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import pandas as pd
import torch

MODEL = "Wav2Vec2ConformerForPreTraining"
PAIRS = (  # most important first: a deadline drops the tail
    "eager:cpu:fp32 vs eager:cuda:tf32-conv",  # a GPU runner with torch's defaults against a CPU runner
    "eager:cpu:fp32 vs eager:cuda:fp32",  # TF32 off
    "eager:cpu:fp32 vs eager:cpu:tf32-conv",  # the emulation, same seeds, same machine
    "eager:cpu:fp32 vs eager:cuda:bf16",
    "eager:cpu:fp32 vs eager:cpu:bf16",
    "eager:cpu:fp32 vs eager:cuda:fp16",
    "eager:cpu:fp32 vs eager:cpu:fp16",
)
DAC_SIDES = ("eager:cpu:fp32", "eager:cpu:tf32-conv", "eager:cuda:fp32", "eager:cuda:tf32-conv")


def machine_facts() -> dict:
    import transformers

    facts = {"python": platform.python_version(), "torch": torch.__version__,
             "transformers": transformers.__version__, "cpu": platform.processor() or platform.machine(),
             "cuda_available": torch.cuda.is_available(),
             "default_cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
             "default_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32)}
    try:
        import onnxruntime

        facts["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        facts["onnxruntime"] = None
    if torch.cuda.is_available():
        facts.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                     cudnn=torch.backends.cudnn.version())
    return facts


def tf32_probe() -> pd.DataFrame:
    """Each kind of layer on CUDA with TF32 allowed and not: whether its output changes (TF32 ran) and by how
    much, beside the emulation's change on the CPU for the same inputs."""
    from exactness.runtimes.sides import Side

    generator = torch.Generator().manual_seed(0)
    kinds = {
        "conv1d, one input channel (a raw-audio first layer)": (torch.nn.Conv1d(1, 64, 7, padding=3),
                                                                 torch.randn(1, 1, 4096, generator=generator)),
        "conv1d, 32 channels (a feature extractor layer)": (torch.nn.Conv1d(32, 32, 8, stride=4),
                                                            torch.randn(13, 32, 1024, generator=generator)),
        "conv1d, depthwise (one input channel per group)": (torch.nn.Conv1d(64, 64, 7, padding=3, groups=64),
                                                            torch.randn(1, 64, 4096, generator=generator)),
        "linear (matrix product)": (torch.nn.Linear(256, 256), torch.randn(64, 256, generator=generator)),
    }
    rows = []
    for kind, (layer, x) in kinds.items():
        layer = layer.eval()
        with torch.no_grad():
            cpu32 = layer(x)
            with Side.parse("eager:cpu:tf32").applied():
                emulated = layer(x)
            out = {}
            if torch.cuda.is_available():
                gpu_layer, gx = layer.cuda(), x.cuda()
                for spec in ("eager:cuda:fp32", "eager:cuda:tf32"):
                    with Side.parse(spec).applied():
                        out[spec] = gpu_layer(gx).cpu()
        row = {"layer": kind, "emulated_changes": not torch.equal(cpu32, emulated),
               "emulated_max_diff": float((cpu32 - emulated).abs().max())}
        if out:
            diff = (out["eager:cuda:fp32"] - out["eager:cuda:tf32"]).abs().max()
            row.update(cuda_tf32_changes=bool(diff > 0), cuda_max_diff=float(diff),
                       cuda_fp32_vs_cpu=float((out["eager:cuda:fp32"] - cpu32).abs().max()))
        rows.append(row)
    return pd.DataFrame(rows)


def proofs(fast_paths: bool) -> dict:
    """The fast path's CUDA logits against a plain build's, and the perplexity from codes against the model's."""
    from exactness.models import wav2vec2_family as family
    from exactness.models.quantizer_logits import FastLogits, plain_logits
    from exactness.runtimes.sides import Side
    from exactness.studies.near_tie import precision

    found = {"fast_paths": fast_paths, "logits_fast_equals_plain": {}, "perplexity_from_codes_minus_model": {}}
    fast = FastLogits(MODEL) if fast_paths else None
    for spec in ("eager:cpu:fp32", "eager:cuda:fp32", "eager:cuda:tf32-conv", "eager:cpu:tf32-conv"):
        side = Side.parse(spec)
        if side.device.value == "cuda" and not torch.cuda.is_available():
            continue
        for seed in (0, 1):
            plain = plain_logits(MODEL, seed, side)
            if fast is not None:
                found["logits_fast_equals_plain"][f"{spec} seed {seed}"] = bool(torch.equal(fast(seed, side), plain))
            if side.device.value == "cuda":
                built = family.build_model(MODEL, seed).cuda()
                inputs = {k: v.cuda() for k, v in family.tester_inputs(MODEL, seed).items()}
                with torch.no_grad(), side.applied():
                    model_perplexity = float(built(**inputs).codevector_perplexity)
                ours = precision._perplexity(MODEL, plain.argmax(-1), plain.shape)
                found["perplexity_from_codes_minus_model"][f"{spec} seed {seed}"] = ours - model_perplexity
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactness.gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder to write the tables into (created)")
    parser.add_argument("--seeds", type=int, default=19_885, help="conformer seeds 0..N-1 under each pair")
    parser.add_argument("--plain-seeds", type=int, default=2_000, help="seeds when the fast path cannot be used")
    parser.add_argument("--calibration", type=int, default=200, help="seeds that measure the noise law")
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--pairs-deadline", type=float, default=240.0, help="seconds; no pair starts after it")
    parser.add_argument("--dac-seconds", type=float, default=1.0, help="audio length for the DAC chain")
    parser.add_argument("--skip-dac", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    from exactness.runtimes.sides import Pair
    from exactness.studies.near_tie import precision
    from exactness.studies.near_tie.screen import replay_proof

    facts = machine_facts()
    facts["perplexity_in_side_dtype"] = True  # each side's perplexity computed as it computes it (bf16/fp16 too)
    if not facts["cuda_available"]:
        print("no CUDA device: the CUDA pairs are skipped (the rest runs, for testing the command)", file=sys.stderr)
    probe = tf32_probe()
    probe.to_csv(args.out / "tf32_probe.csv", index=False)
    print(probe.to_string(), flush=True)
    try:
        replay_proof([MODEL], (0, 1))
        fast_paths = True
    except Exception as error:  # another transformers may construct in another order: the plain path then
        print(f"fast path refused here ({str(error)[:200]}); plain builds", file=sys.stderr)
        fast_paths = False
    facts["errors"] = []
    try:
        facts["proofs"] = proofs(fast_paths)
    except Exception as error:  # recorded, and the measurements still run
        facts["errors"].append(f"proofs: {type(error).__name__}: {error}")
    _write(args.out, facts)

    n = args.seeds if fast_paths else min(args.seeds, args.plain_seeds)
    tables, skipped = [], []
    for spec in PAIRS:
        pair = Pair.parse(spec)
        if pair.needs_cuda and not facts["cuda_available"]:
            skipped.append(f"{spec}: no CUDA device")
            continue
        if time.monotonic() - start > args.pairs_deadline:
            skipped.append(f"{spec}: past the deadline")
            continue
        t = time.monotonic()
        try:
            tables.append(precision.compare_pairs([MODEL], [pair], 0, n, calibration=args.calibration,
                                                  workers=args.workers, progress_every=30.0, fast_paths=fast_paths))
        except Exception as error:
            facts["errors"].append(f"{spec}: {type(error).__name__}: {error}")
            skipped.append(f"{spec}: failed")
            continue
        print(f"{spec}: {n} seeds in {time.monotonic() - t:.0f} s", flush=True)
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=precision.PAIR_COLUMNS)
    # the summary (its bootstrap takes minutes) is made where the run is read back: these are all it needs
    table[precision.PAIR_COLUMNS].to_parquet(args.out / "pairs.parquet")
    precision.noise_law(table).to_parquet(args.out / "noise_law.parquet")
    precision.smallest_gaps(table).to_parquet(args.out / "smallest_gaps.parquet")
    facts.update(seeds=n, fast_paths=fast_paths, skipped=skipped,
                 pairs=[p for p in PAIRS if not any(s.startswith(p + ":") for s in skipped)])
    _write(args.out, facts)
    if not args.skip_dac:
        try:
            _dac_chain(args.out, args.dac_seconds, facts["cuda_available"])
        except Exception as error:
            facts["errors"].append(f"dac: {type(error).__name__}: {error}")
    facts["seconds"] = round(time.monotonic() - start, 1)
    _write(args.out, facts)
    print(json.dumps(facts, indent=1), flush=True)
    return 0


def _write(out: Path, facts: dict) -> None:
    (out / "machine.json").write_text(json.dumps(facts, indent=1))


def _dac_chain(out: Path, seconds: float, cuda: bool) -> None:
    from exactness.models import dac
    from exactness.runtimes.sides import Side
    from exactness.studies.dac_propagation.precision import encoder_chain

    torch.set_num_threads(8)
    chains = []
    for init in ("default", "variance_preserving"):
        plain = dac.template("44khz", 0, init)
        audio = dac.audio("44khz", seconds, 0)
        for spec in DAC_SIDES:
            side = Side.parse(spec)
            if side.device.value == "cuda" and not cuda:
                continue
            chains.append(encoder_chain(plain, audio, side).assign(init=init))
    chain = pd.concat(chains, ignore_index=True)
    chain.to_csv(out / "dac_chain.csv", index=False)
    print(chain.to_string(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
