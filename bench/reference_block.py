#!/usr/bin/env python3
"""PyTorch's own time for the transformer layer that compute_bench times.

The same pre-norm block as worker/model/gpt.cc (LayerNorm, one fused q/k/v
projection with bias, causal scaled_dot_product_attention, output projection,
residual; LayerNorm, fc, exact GELU, projection, residual) or
worker/model/llama.cc (RMSNorm, q/k/v projections without bias, rotary
embeddings, grouped-query attention by repeating the key/value heads, causal
scaled_dot_product_attention, o_proj, residual; RMSNorm, SiLU(gate) * up,
down, residual), with the same precision policy: float32 master weights and
residual stream, the products (linear layers, attention) under
torch.autocast in the compute type, the norms in float32. It times, per
layer, F (forward), B+W (one fused backward from a given gradient, as the
stage input's gradient is produced) and F+B+W, in PyTorch eager and with
torch.compile (skipped, with the reason, where it cannot run), in ms and
TFLOP/s, counting FLOPs as compute_bench does (linears 2·T·Σ out·in per pass,
twice in the backward; attention 4·b·s²·h forward, 8·b·s²·h backward, the
causal half not discounted).

What differs from zbpp's pass: nothing in the arithmetic; zbpp splits the
backward in B and W (bench/compute_bench.cc's split passes, its linear
layers' weights cast once per change rather than per forward), PyTorch runs
one fused backward with autocast's casts in every forward.

Times: on a GPU wall-clock between device synchronisations; on the CPU this
thread's CPU time with one intra-op thread (as compute_bench). Gradients are
zeroed in place between repetitions (kept buffers, as a training step).

  reference_block.py [--architecture gpt|llama] [--hidden 1024] [--heads 16]
      [--kv-heads H] [--ffn 4h] [--seq-len 128] [--microbatch-size 1]
      [--layers 2] [--precision bf16|fp16|fp32] [--device cpu|cuda:0]
      [--reps 10] [--warmup 3] [--no-compile] [--json]
"""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

TYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Block(torch.nn.Module):
    """One transformer layer of gpt.cc or llama.cc, float32 parameters."""

    def __init__(self, shape):
        super().__init__()
        self.shape = shape
        h, f, a = shape["hidden"], shape["ffn"], shape["heads"]
        d = h // a
        kv = shape["kv_heads"] * d

        def linear(out_features, in_features, bias):
            return torch.nn.Linear(in_features, out_features, bias=bias)

        if shape["architecture"] == "gpt":
            self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
            self.qkv, self.proj = linear(3 * h, h, True), linear(h, h, True)
            self.fc, self.fc2 = linear(f, h, True), linear(h, f, True)
        else:
            self.norm1 = torch.nn.Parameter(torch.ones(h))
            self.norm2 = torch.nn.Parameter(torch.ones(h))
            self.q, self.k, self.v = linear(h, h, False), linear(kv, h, False), linear(kv, h, False)
            self.o = linear(h, h, False)
            self.gate, self.up = linear(f, h, False), linear(f, h, False)
            self.down = linear(h, f, False)
            theta, s = 10000.0, shape["seq_len"]
            inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
            angles = torch.outer(torch.arange(s, dtype=torch.float32), inv)
            angles = torch.cat([angles, angles], dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        b, s, h = x.shape
        a, g = self.shape["heads"], self.shape["kv_heads"]
        d = h // a
        heads = lambda t, n: t.view(b, s, n, d).transpose(1, 2)
        if self.shape["architecture"] == "gpt":
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
            y = F.scaled_dot_product_attention(heads(q, a), heads(k, a), heads(v, a),
                                               is_causal=True)
            out = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
            return out + self.fc2(F.gelu(self.fc(self.ln2(out))))

        def rms(t, weight):
            return weight * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5))

        def rotary(t):
            cos, sin = self.cos[:s].to(t.dtype), self.sin[:s].to(t.dtype)
            half = t.shape[-1] // 2
            rotated = torch.cat([-t[..., half:], t[..., :half]], dim=-1)
            return t * cos + rotated * sin

        device = x.device.type
        compute = (torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
                   else x.dtype)
        inp = rms(x, self.norm1).to(compute)
        q, k = rotary(heads(self.q(inp), a)), rotary(heads(self.k(inp), g))
        v = heads(self.v(inp), g)
        if g < a:
            k, v = k.repeat_interleave(a // g, dim=1), v.repeat_interleave(a // g, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = x + self.o(y.transpose(1, 2).reshape(b, s, h))
        mlp = rms(out, self.norm2).to(compute)
        return out + self.down(F.silu(self.gate(mlp)) * self.up(mlp))


class Stack(torch.nn.Module):
    """`layers` blocks under autocast in the compute type (none for fp32)."""

    def __init__(self, shape, layers, compute_type):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(shape) for _ in range(layers))
        self.compute_type = compute_type

    def forward(self, x):
        with torch.autocast(x.device.type, dtype=self.compute_type,
                            enabled=self.compute_type != torch.float32):
            for block in self.blocks:
                x = block(x)
        return x


def layer_flops(shape, microbatch_size):
    """F, B+W FLOPs of one layer, compute_bench's convention."""
    h, f, s, b = shape["hidden"], shape["ffn"], shape["seq_len"], microbatch_size
    kv = shape["kv_heads"] * (h // shape["heads"])
    if shape["architecture"] == "gpt":
        linears = 4 * h * h + 2 * h * f
    else:
        linears = 2 * h * h + 2 * h * kv + 3 * h * f
    t = b * s
    forward = 2 * t * linears + 4 * b * s * s * h
    backward = 4 * t * linears + 8 * b * s * s * h
    return forward, backward


def timer(device):
    if device.type == "cuda":
        def now():
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return now
    return time.thread_time


def time_passes(model, shape, args, device):
    """Median seconds of F and of the fused backward, per call of `model`."""
    b, s, h = args.microbatch_size, shape["seq_len"], shape["hidden"]
    gen = torch.Generator(device="cpu").manual_seed(1)
    hidden = torch.randn(b, s, h, generator=gen).to(device)
    grad = (torch.randn(b, s, h, generator=gen) * 1e-3).to(device)
    now = timer(device)
    forward, backward = [], []
    for i in range(args.warmup + args.reps):
        for p in model.parameters():
            if p.grad is not None:
                p.grad.zero_()
        x = hidden.detach().requires_grad_(True)
        start = now()
        out = model(x)
        mid = now()
        out.backward(grad)
        end = now()
        if i >= args.warmup:
            forward.append(mid - start)
            backward.append(end - mid)
    return statistics.median(forward), statistics.median(backward)


def shape_of(args):
    kv = args.kv_heads or args.heads
    return {"architecture": args.architecture, "hidden": args.hidden, "heads": args.heads,
            "kv_heads": kv, "ffn": args.ffn or 4 * args.hidden, "seq_len": args.seq_len}


class Reference:
    """The eager and compiled models of one shape, kept between rounds (a
    compiled model compiles once)."""

    def __init__(self, shape, args):
        self.shape, self.args = shape, args
        self.device = torch.device(args.device)
        torch.manual_seed(1)
        self.eager = Stack(shape, args.layers, TYPES[args.precision]).to(self.device)
        for p in self.eager.parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, 0.0, 0.02)
        self.compiled, self.compile_error = None, None
        if args.compile:
            try:
                self.compiled = torch.compile(self.eager)
                time_passes(self.compiled, shape, argparse.Namespace(
                    microbatch_size=args.microbatch_size, warmup=1, reps=1), self.device)
            except Exception as e:  # noqa: BLE001 - any compile failure skips compile
                self.compiled = None
                self.compile_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"

    def measure(self):
        """{"eager": (F, B+W) seconds per layer, "compile": ... or None}."""
        out = {}
        for name, model in (("eager", self.eager), ("compile", self.compiled)):
            if model is None:
                out[name] = None
                continue
            f, bw = time_passes(model, self.shape, self.args, self.device)
            out[name] = (f / self.args.layers, bw / self.args.layers)
        return out


def row(name, times, flops):
    if times is None:
        return f"| {name} | – | – | – | – |"
    f, bw = times
    return (f"| {name} | {1e3 * f:.3f} | {1e3 * bw:.3f} | {1e3 * (f + bw):.3f} | "
            f"{1e-12 * flops[0] / f:.3g} / {1e-12 * flops[1] / bw:.3g} / "
            f"{1e-12 * (flops[0] + flops[1]) / (f + bw):.3g} |")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--architecture", choices=["gpt", "llama"], default="gpt")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--ffn", type=int, default=0)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--microbatch-size", type=int, default=1)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--precision", choices=sorted(TYPES), default="bf16")
    p.add_argument("--device", default="cpu")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def main(argv):
    args = parse(argv)
    if args.device == "cpu":
        torch.set_num_threads(1)
    shape = shape_of(args)
    ref = Reference(shape, args)
    times = ref.measure()
    flops = layer_flops(shape, args.microbatch_size)
    if args.json:
        print(json.dumps({"shape": shape, "times": times, "flops": flops,
                          "compile_error": ref.compile_error}))
        return 0
    print(f"PyTorch {torch.__version__}, {args.precision} on {args.device}, {shape}, "
          f"microbatch {args.microbatch_size}, median of {args.reps} after {args.warmup}, "
          "per layer\n")
    print("| | F ms | B+W ms | F+B+W ms | TFLOP/s F / B+W / F+B+W |\n|---|---:|---:|---:|---|")
    print(row("eager", times["eager"], flops))
    print(row("torch.compile", times["compile"], flops))
    if ref.compile_error:
        print(f"\ntorch.compile skipped: {ref.compile_error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
