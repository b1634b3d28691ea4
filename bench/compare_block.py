#!/usr/bin/env python3
"""zbpp's transformer layer against PyTorch's, in one run: one table.

For each shape, in alternating rounds: compute_bench (zbpp's passes: F, then
B and W split, and F then B and W back to back as one merged pass, as the
executor runs a merged pair; bench/compute_bench.cc) and
bench/reference_block.py's same block in PyTorch eager and with
torch.compile (one fused backward each), then the medians over the rounds of
F+B+W per layer, the ratios zbpp / eager and zbpp / compile (split and
merged), and TFLOP/s (compute_bench's FLOP convention).

zbpp's per-layer time is compute_bench's chunk 0 of a 2-stage cut with
--layers blocks per chunk, divided by --layers; the vocabulary is 256 so
that the chunk's embedding is negligible (it is not part of a layer).

  compare_block.py --compute-bench build/bench/compute_bench
      [--shape NAME:ARCH:HIDDEN:HEADS:KV_HEADS:FFN:SEQ_LEN ...]
      [--precision bf16] [--device cpu|cuda:0] [--layers 2]
      [--microbatch-size 1] [--rounds 2] [--reps 10] [--warmup 3]
      [--compile NAME,...|all|none]

Without --shape: one small gpt layer (h 512, 8 heads, s 128) for a CPU.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True  # No __pycache__ left in the source tree.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_block  # noqa: E402  (the reference, same directory)


def parse_shape(text):
    parts = text.split(":")
    if len(parts) != 7 or parts[1] not in ("gpt", "llama"):
        raise argparse.ArgumentTypeError(
            f"--shape must be NAME:gpt|llama:HIDDEN:HEADS:KV_HEADS:FFN:SEQ_LEN, got {text}")
    try:
        h, a, kv, f, s = (int(p) for p in parts[2:])
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape: sizes must be integers, got {text}")
    return {"name": parts[0], "architecture": parts[1], "hidden": h, "heads": a,
            "kv_heads": kv, "ffn": f, "seq_len": s}


def zbpp_layer(args, shape):
    """((F, B+W), (F, merged BW)) seconds per layer from compute_bench's chunk 0."""
    cmd = [args.compute_bench, f"--architecture={shape['architecture']}",
           f"--hidden={shape['hidden']}", f"--heads={shape['heads']}",
           f"--kv-heads={shape['kv_heads']}", f"--ffn={shape['ffn']}",
           f"--seq-len={shape['seq_len']}", f"--layers={2 * args.layers}", "--stages=2",
           f"--microbatch-size={args.microbatch_size}", "--vocab=256",
           f"--precision={args.precision}", f"--device={args.device}",
           f"--reps={args.reps}", f"--warmup={args.warmup}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    ms = {}
    for name, value in re.findall(r"^\| 0 \| ([FBW]) \| ([0-9.]+) \|", out, re.M):
        ms[name] = float(value)
    merged = re.search(r"^\| 0 \| F \+ merged BW \| ([0-9.]+) \|", out, re.M)
    if set(ms) != {"F", "B", "W"} or merged is None:
        raise RuntimeError(f"compute_bench printed no chunk 0 F, B, W and merged rows:\n{out}")
    f = 1e-3 * ms["F"] / args.layers
    return ((f, 1e-3 * (ms["B"] + ms["W"]) / args.layers),
            (f, 1e-3 * float(merged.group(1)) / args.layers - f))


def median_pair(samples):
    if not samples or any(s is None for s in samples):
        return None
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compute-bench", required=True)
    p.add_argument("--shape", type=parse_shape, action="append")
    p.add_argument("--precision", choices=sorted(reference_block.TYPES), default="bf16")
    p.add_argument("--device", default="cpu")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--microbatch-size", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--compile", default="all")
    args = p.parse_args(argv)
    shapes = args.shape or [parse_shape("h512:gpt:512:8:8:2048:128")]
    compiled = {s["name"] for s in shapes} if args.compile == "all" else (
        set() if args.compile == "none" else set(args.compile.split(",")))
    if args.device == "cpu":
        reference_block.torch.set_num_threads(1)

    rows, notes = [], []
    for shape in shapes:
        ref_args = argparse.Namespace(layers=args.layers, precision=args.precision,
                                      device=args.device, reps=args.reps, warmup=args.warmup,
                                      microbatch_size=args.microbatch_size,
                                      compile=shape["name"] in compiled)
        ref = reference_block.Reference(shape, ref_args)
        if ref.compile_error:
            notes.append(f"{shape['name']}: torch.compile skipped: {ref.compile_error}")
        samples = {"zbpp": [], "merged": [], "eager": [], "compile": []}
        for _ in range(args.rounds):
            split, merged = zbpp_layer(args, shape)
            samples["zbpp"].append(split)
            samples["merged"].append(merged)
            measured = ref.measure()
            samples["eager"].append(measured["eager"])
            samples["compile"].append(measured["compile"])
        flops = reference_block.layer_flops(shape, args.microbatch_size)
        rows.append((shape, {k: median_pair(v) for k, v in samples.items()}, flops))
        del ref

    def total(t):
        return None if t is None else t[0] + t[1]

    def fmt(x, scale=1e3, spec=".3f"):
        return "–" if x is None else format(scale * x, spec)

    print(f"zbpp (compute_bench, split B then W) against PyTorch "
          f"{reference_block.torch.__version__} (one fused backward), {args.precision} on "
          f"{args.device}, microbatch {args.microbatch_size}, per layer, medians of "
          f"{args.rounds} alternating rounds of {args.reps} repetitions\n")
    print("| shape | zbpp F+B+W ms | zbpp F + merged BW | eager | compile | zbpp / eager | "
          "zbpp / compile | merged / eager | merged / compile | "
          "TFLOP/s zbpp / eager / compile |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for shape, t, flops in rows:
        z, zm = total(t["zbpp"]), total(t["merged"])
        e, c = total(t["eager"]), total(t["compile"])
        tf = lambda x: "–" if x is None else format(1e-12 * (flops[0] + flops[1]) / x, ".3g")
        ratio = lambda a, b: fmt(None if a is None or b is None else a / b, 1, ".2f")
        print(f"| {shape['name']} | {fmt(z)} | {fmt(zm)} | {fmt(e)} | {fmt(c)} | "
              f"{ratio(z, e)} | {ratio(z, c)} | {ratio(zm, e)} | {ratio(zm, c)} | "
              f"{tf(z)} / {tf(e)} / {tf(c)} |")
    print("\n| shape | F ms zbpp / eager / compile | B+W ms zbpp / eager / compile |\n"
          "|---|---|---|")
    for shape, t, _ in rows:
        part = lambda i: " / ".join(fmt(None if t[k] is None else t[k][i])
                                    for k in ("zbpp", "eager", "compile"))
        print(f"| {shape['name']} | {part(0)} | {part(1)} |")
    for note in notes:
        print(f"\n{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
