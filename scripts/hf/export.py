"""Writes a zbpp checkpoint as a Hugging Face model directory.

    zbppctl status JOB --format json | scripts/export --job - --out OUT
    scripts/export --spec SPEC [--checkpoint DIR] [--step N] --out OUT
                   [--tokenizer FILE]

--job reads the job as `zbppctl status --format json` prints it (its spec,
and its last checkpoint's step as the default --step); --spec reads a job
spec, the YAML given to `zbppctl submit` or its JSON. DIR defaults to the
spec's checkpoint.directory; N to the job's last checkpoint, or with --spec
the newest step with every stage's file. OUT receives:

* model.safetensors (the `safetensors` library): the parameters in float32
  under transformers' names, without the optimizer state;
* config.json: LlamaForCausalLM for `llama` (the worker's parameters carry
  transformers' names already); GPT2LMHeadModel for `gpt`, whose blocks are
  GPT-2's (pre-LayerNorm, fused q/k/v with biases, learned positions, a
  head without bias) except for the MLP's activation, exact GELU (GPT-2's
  "gelu_new" is its tanh approximation): config.json says
  activation_function "gelu", which transformers runs as the exact one.
  GPT-2's Conv1D stores weights [in, out]: zbpp's [out, in] are transposed.
* tokenizer.json when the job used one: --tokenizer, else the tokenizer.json
  beside dataset.tokens.path (scripts/tokenize writes it there).

Checkpoint files: DIR/step-<8 digits>/rank-<3 digits>.pt, one per pipeline
stage, each LibTorch's serialize format (torch.jit.load reads it), named
tensors: the stage's parameters and its AdamW state (each parameter's
moments, suffixed .exp_avg / .exp_avg_sq, and optimizer.* counters), which
the export leaves out (worker/data/checkpoint.h).

Exit status: 0 done; 2 bad arguments or input (one line on stderr); 1
anything else.
"""

import json
import os
import re
import shutil
import sys

from hf_cli import Parser, UsageError, run

# The AdamW state beside the parameters: each one's moments, and the
# optimizer's own counters ("optimizer.step").
OPTIMIZER_SUFFIXES = (".exp_avg", ".exp_avg_sq")
OPTIMIZER_PREFIX = "optimizer."
STEP_DIRECTORY = re.compile(r"^step-(\d{8,})$")
RANK_FILE = re.compile(r"^rank-(\d{3,})\.pt$")


def load_document(flag, path):
    """A JSON or YAML mapping from `path` ("-": stdin)."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path) as f:
                text = f.read()
    except OSError as e:
        raise UsageError(f"{flag} {path}: {e.strerror}") from e
    try:
        document = json.loads(text)
    except ValueError:
        import yaml
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise UsageError(f"{flag} {path}: neither JSON nor YAML") from e
    if not isinstance(document, dict):
        raise UsageError(f"{flag} {path}: not a mapping")
    return document


def stages_of(spec):
    return int(spec.get("pipeline", {}).get("stages", 1))


def latest_complete_step(directory, stages):
    """The newest step directory holding a file for every stage."""
    try:
        names = os.listdir(directory)
    except OSError as e:
        raise UsageError(f"--checkpoint {directory}: {e.strerror}") from e
    steps = sorted((int(m.group(1)) for m in map(STEP_DIRECTORY.match, names) if m),
                   reverse=True)
    for step in steps:
        if all(os.path.isfile(rank_path(directory, step, r)) for r in range(stages)):
            return step
    raise UsageError(f"--checkpoint {directory}: no complete checkpoint of {stages} stage(s)")


def rank_path(directory, step, rank):
    return os.path.join(directory, f"step-{step:08d}", f"rank-{rank:03d}.pt")


def archive_names(path):
    """The tensors' names in a LibTorch archive: OutputArchive stores each as an
    attribute of the archive's module, declared in its code/__torch__.py."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        code = next((n for n in archive.namelist() if n.endswith("code/__torch__.py")), None)
        if code is None:
            raise UsageError(f"{path}: not a LibTorch archive")
        text = archive.read(code).decode()
    return re.findall(r'__annotations__\["(.+?)"\] = Tensor', text)


def read_parameters(directory, step, stages):
    """Every stage's parameters, by name, as float32 CPU tensors."""
    import torch

    parameters = {}
    for rank in range(stages):
        path = rank_path(directory, step, rank)
        if not os.path.isfile(path):
            raise UsageError(f"--checkpoint {directory}: step {step} lacks {path}")
        archive = torch.jit.load(path, map_location="cpu")
        for name in archive_names(path):
            tensor = archive._c.getattr(name)
            if name.endswith(OPTIMIZER_SUFFIXES) or name.startswith(OPTIMIZER_PREFIX):
                continue
            # A tied embedding split over two stages is held twice, equal:
            # either copy will do.
            parameters.setdefault(name, tensor.detach().to(torch.float32).contiguous())
    return parameters


def model_fields(spec):
    model = spec["model"]
    hidden, heads = int(model["hidden"]), int(model["heads"])
    return {
        "architecture": model.get("architecture", ""),
        "layers": int(model["layers"]),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": int(model.get("kv_heads", heads)),
        "vocab": int(model["vocab"]),
        "seq_len": int(model["seq_len"]),
        "ffn": int(model.get("ffn_hidden", 4 * hidden)),
        "norm_eps": float(model.get("norm_eps", 1e-5)),
        "rope_theta": float(model.get("rope_theta", 10000.0)),
        "tied": bool(model.get("tie_embeddings", False)),
    }


def gpt2(m, parameters):
    """GPT2LMHeadModel's config and tensors for zbpp's `gpt`."""
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": m["vocab"], "n_positions": m["seq_len"], "n_embd": m["hidden"],
        "n_layer": m["layers"], "n_head": m["heads"], "n_inner": m["ffn"],
        "activation_function": "gelu", "layer_norm_epsilon": m["norm_eps"],
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "tie_word_embeddings": m["tied"], "torch_dtype": "float32",
    }
    renames = {"embed.token": "transformer.wte.weight",
               "embed.position": "transformer.wpe.weight",
               "final_ln.weight": "transformer.ln_f.weight",
               "final_ln.bias": "transformer.ln_f.bias",
               "head.weight": "lm_head.weight"}
    blocks = {"ln1": "ln_1", "ln2": "ln_2", "attn.qkv": "attn.c_attn",
              "attn.proj": "attn.c_proj", "mlp.fc": "mlp.c_fc", "mlp.proj": "mlp.c_proj"}
    tensors = {}
    for name, tensor in parameters.items():
        block = re.match(r"^block(\d+)\.(.+)\.(weight|bias)$", name)
        if block:
            layer, part, kind = block.groups()
            if part not in blocks:
                raise UsageError(f"unexpected gpt parameter {name}")
            if kind == "weight" and part not in ("ln1", "ln2"):
                tensor = tensor.t().contiguous()  # Conv1D: [in, out]
            tensors[f"transformer.h.{layer}.{blocks[part]}.{kind}"] = tensor
        elif name in renames:
            tensors[renames[name]] = tensor
        else:
            raise UsageError(f"unexpected gpt parameter {name}")
    if m["tied"]:
        tensors.pop("lm_head.weight", None)
    return config, tensors


def llama(m, parameters):
    """LlamaForCausalLM's config and tensors for zbpp's `llama`."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": m["vocab"], "hidden_size": m["hidden"], "intermediate_size": m["ffn"],
        "num_hidden_layers": m["layers"], "num_attention_heads": m["heads"],
        "num_key_value_heads": m["kv_heads"], "head_dim": m["hidden"] // m["heads"],
        "max_position_embeddings": m["seq_len"], "rms_norm_eps": m["norm_eps"],
        "rope_theta": m["rope_theta"],
        "rope_parameters": {"rope_type": "default", "rope_theta": m["rope_theta"]},
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": m["tied"], "torch_dtype": "float32",
    }
    tensors = dict(parameters)
    if m["tied"]:
        tensors.pop("lm_head.weight", None)
    return config, tensors


FAMILIES = {"gpt": gpt2, "llama": llama}


def main(argv):
    parser = Parser(prog="scripts/export", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--job", help="the job as `zbppctl status --format json` prints it")
    source.add_argument("--spec", help="the job spec (YAML or JSON)")
    parser.add_argument("--checkpoint", help="the checkpoint directory (the spec's)")
    parser.add_argument("--step", type=int, help="the step (the job's last checkpoint)")
    parser.add_argument("--out", required=True, help="the model directory to write")
    parser.add_argument("--tokenizer", help="tokenizer.json to include")
    args = parser.parse_args(argv)

    step = args.step
    if args.job is not None:
        job = load_document("--job", args.job)
        spec = job.get("spec")
        if step is None and int(job.get("last_checkpoint_step", -1)) >= 0:
            step = int(job["last_checkpoint_step"])
    else:
        spec = load_document("--spec", args.spec)
    if not isinstance(spec, dict) or "model" not in spec:
        raise UsageError("not a job spec (no model)")
    directory = args.checkpoint or spec.get("checkpoint", {}).get("directory")
    if not directory:
        raise UsageError("--checkpoint: the spec has no checkpoint.directory; name one")
    m = model_fields(spec)
    family = FAMILIES.get(m["architecture"])
    if family is None:
        raise UsageError(f"model.architecture \"{m['architecture']}\": no Hugging Face "
                         f"export (known: {', '.join(sorted(FAMILIES))})")
    stages = stages_of(spec)
    if step is None:
        step = latest_complete_step(directory, stages)
    if step < 0:
        raise UsageError(f"--step must be >= 0, got {step}")
    config, tensors = family(m, read_parameters(directory, step, stages))

    tokenizer = args.tokenizer
    if tokenizer is None:
        token_file = spec.get("dataset", {}).get("tokens", {}).get("path")
        beside = token_file and os.path.join(os.path.dirname(token_file), "tokenizer.json")
        tokenizer = beside if beside and os.path.isfile(beside) else None
    elif not os.path.isfile(tokenizer):
        raise UsageError(f"--tokenizer {tokenizer}: no such file")

    from safetensors.torch import save_file

    os.makedirs(args.out, exist_ok=True)
    save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    if tokenizer is not None:
        shutil.copyfile(tokenizer, os.path.join(args.out, "tokenizer.json"))
    print(f"export: step {step} of {stages} stage(s), {len(tensors)} tensors, "
          f"{config['architectures'][0]}{', tokenizer.json' if tokenizer else ''} -> {args.out}")
    return 0


if __name__ == "__main__":
    run("export", main)
