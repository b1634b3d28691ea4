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

OUT must be absent or an empty directory; --force writes into a non-empty
one, replacing those three files (and removing a tokenizer.json this export
does not have, so that no stale tokenizer sits beside new weights) and
leaving everything else there alone. OUT itself must not be a symbolic
link. The files are written into a new directory beside OUT and renamed into
place: a failed export leaves OUT as it was, and no link is followed (a
link at OUT/config.json is replaced, never written through).

What is exported is checked first: the step's stage files are exactly the
spec's pipeline.stages (no stage-<s>.pt beyond them); every stage file has its
owner file (stage-<s>.owner, worker/data/checkpoint.h), all of one owner,
which with --job is that job; and the tensors are exactly the ones the spec's
model has, each with the spec's shape (a 1-layer spec over a 2-layer
checkpoint names the first tensor it does not have).

Checkpoint files: DIR/step-<8 digits>/stage-<3 digits>.pt (rank-<3 digits>.pt
in checkpoints written before files were named per stage), one per pipeline
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
import stat
import sys
import tempfile

from hf_cli import Parser, UsageError, run

# The AdamW state beside the parameters: each one's moments, and the
# optimizer's own counters ("optimizer.step").
OPTIMIZER_SUFFIXES = (".exp_avg", ".exp_avg_sq")
OPTIMIZER_PREFIX = "optimizer."
STEP_DIRECTORY = re.compile(r"^step-(\d{8,})$")
STAGE_FILE = re.compile(r"^(?:stage|rank)-(\d{3,})\.pt$")
# What an export writes into --out; nothing else there is touched.
EXPORT_FILES = ("model.safetensors", "config.json", "tokenizer.json")


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
        if all(os.path.isfile(stage_path(directory, step, s)) for s in range(stages)):
            return step
    raise UsageError(f"--checkpoint {directory}: no complete checkpoint of {stages} stage(s)")


def stage_path(directory, step, stage):
    """The file of `stage` at `step`: stage-NNN.pt, or the former name rank-NNN.pt
    when only that one exists (worker/data/checkpoint.h)."""
    step_directory = os.path.join(directory, f"step-{step:08d}")
    path = os.path.join(step_directory, f"stage-{stage:03d}.pt")
    former = os.path.join(step_directory, f"rank-{stage:03d}.pt")
    return former if not os.path.lexists(path) and os.path.lexists(former) else path


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


def check_stages_and_owner(directory, step, stages, job_id):
    """The step's stage files are stages [0, stages) and no more, each with an
    owner file (worker/data/checkpoint.h: "<job id> spec <fingerprint>"), one
    owner for all, which is `job_id` when given. Returns the owner line."""
    step_directory = os.path.dirname(stage_path(directory, step, 0))
    try:
        names = os.listdir(step_directory)
    except OSError as e:
        raise UsageError(f"--checkpoint {directory}: step {step}: {e.strerror}") from e
    for name in sorted(names):
        match = STAGE_FILE.match(name)
        if match and int(match.group(1)) >= stages:
            raise UsageError(f"--checkpoint {directory}: step {step} holds {name}, but the "
                             f"spec has {stages} stage(s): the checkpoint is another model's")
    owners = {}
    for stage in range(stages):
        path = stage_path(directory, step, stage)
        if not os.path.isfile(path) or os.path.islink(path):
            raise UsageError(f"--checkpoint {directory}: step {step} lacks {path}")
        owner_path = path[:-len(".pt")] + ".owner"
        try:
            with open(owner_path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as f:
                line = f.read(257).decode("utf-8", "replace").strip()
        except OSError:
            raise UsageError(f"{path} has no owner file ({os.path.basename(owner_path)}): "
                             f"no job of this coordinator wrote it") from None
        owner_job = line.split(" spec ")[0]
        if job_id is not None and owner_job != job_id:
            raise UsageError(f"{path} belongs to {owner_job or 'nobody'}, not {job_id}")
        owners[stage] = line
    if len(set(owners.values())) > 1:
        listed = ", ".join(f"stage {s}: {o}" for s, o in owners.items())
        raise UsageError(f"--checkpoint {directory}: step {step} mixes owners ({listed})")
    return owners[0]


def read_parameters(directory, step, stages):
    """Every stage's parameters, by name, as float32 CPU tensors."""
    import torch

    parameters = {}
    for stage in range(stages):
        path = stage_path(directory, step, stage)
        archive = torch.jit.load(path, map_location="cpu")
        for name in archive_names(path):
            tensor = archive._c.getattr(name)
            if name.endswith(OPTIMIZER_SUFFIXES) or name.startswith(OPTIMIZER_PREFIX):
                continue
            if name in parameters:
                raise UsageError(f"{path} holds {name}, which an earlier stage holds too")
            parameters[name] = tensor.detach().to(torch.float32).contiguous()
    return join_vocabulary_shards(parameters, f"--checkpoint {directory}: step {step}")


SHARD = re.compile(r"^(?P<name>.+)\[(?P<begin>[0-9]+):(?P<end>[0-9]+)\]$")


def join_vocabulary_shards(parameters, where):
    """A vocabulary-parallel job's LM head is held as one shard per stage,
    "<head>[<begin>:<end>]" (rows begin to end: worker/model/vocabulary_shard.h):
    the shards of each name joined into the whole matrix, which must be covered
    from row 0 with neither gap nor overlap."""
    import torch

    shards = {}
    for key in list(parameters):
        match = SHARD.match(key)
        if match:
            rows = (int(match["begin"]), int(match["end"]))
            shards.setdefault(match["name"], []).append((rows, parameters.pop(key)))
    for name, parts in shards.items():
        if name in parameters:
            raise UsageError(f"{where} holds {name} both whole and as vocabulary shards")
        parts.sort(key=lambda part: part[0])
        expected = 0
        for (begin, end), tensor in parts:
            if begin != expected or end <= begin or tensor.shape[0] != end - begin:
                raise UsageError(f"{where}: the vocabulary shards of {name} do not cover its "
                                 f"rows: [{begin}:{end}] where row {expected} comes next")
            expected = end
        parameters[name] = torch.cat([tensor for _, tensor in parts])
    return parameters


def expected_shapes(m):
    """The parameters the spec's model has, by name, with their shapes, as the
    worker's model code makes them (worker/model/gpt.cc, llama.cc); and the
    names that may be absent: the head of a tied model (held only when the
    first and last chunks are on different stages)."""
    v, h, f, s = m["vocab"], m["hidden"], m["ffn"], m["seq_len"]
    shapes = {}
    if m["architecture"] == "gpt":
        head, shapes["embed.token"], shapes["embed.position"] = "head.weight", [v, h], [s, h]
        for layer in range(m["layers"]):
            p = f"block{layer}."
            for norm in ("ln1", "ln2"):
                shapes[p + norm + ".weight"] = shapes[p + norm + ".bias"] = [h]
            for part, out, inner in (("attn.qkv", 3 * h, h), ("attn.proj", h, h),
                                     ("mlp.fc", f, h), ("mlp.proj", h, f)):
                shapes[f"{p}{part}.weight"], shapes[f"{p}{part}.bias"] = [out, inner], [out]
        shapes["final_ln.weight"] = shapes["final_ln.bias"] = [h]
    else:
        d = h // m["heads"]
        head, shapes["model.embed_tokens.weight"] = "lm_head.weight", [v, h]
        for layer in range(m["layers"]):
            p = f"model.layers.{layer}."
            for part, shape in (("input_layernorm", [h]),
                                ("self_attn.q_proj", [m["heads"] * d, h]),
                                ("self_attn.k_proj", [m["kv_heads"] * d, h]),
                                ("self_attn.v_proj", [m["kv_heads"] * d, h]),
                                ("self_attn.o_proj", [h, m["heads"] * d]),
                                ("post_attention_layernorm", [h]),
                                ("mlp.gate_proj", [f, h]), ("mlp.up_proj", [f, h]),
                                ("mlp.down_proj", [h, f])):
                shapes[p + part + ".weight"] = shape
        shapes["model.norm.weight"] = [h]
    shapes[head] = [v, h]
    return shapes, {head} if m["tied"] else set()


def check_parameters(m, parameters, directory, step):
    """Every tensor of the checkpoint is one the spec's model has, with its
    shape, and none of the model's is missing: the first difference, named."""
    shapes, optional = expected_shapes(m)
    where = f"--checkpoint {directory}: step {step}"
    described = f"a {m['layers']}-layer {m['architecture']} spec"
    for name, tensor in parameters.items():
        if name not in shapes:
            raise UsageError(f"{where} holds {name}, which {described} does not have")
        if list(tensor.shape) != shapes[name]:
            raise UsageError(f"{where}: {name} has shape {list(tensor.shape)}, "
                             f"{described} expects {shapes[name]}")
    missing = [n for n in shapes if n not in parameters and n not in optional]
    if missing:
        raise UsageError(f"{where} lacks {missing[0]}, which {described} has")


def check_out(out, force):
    """Whether --out holds anything (to be written into, with --force). Refuses
    a symbolic link, a non-directory, and a non-empty directory without
    --force."""
    try:
        info = os.lstat(out)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise UsageError(f"--out {out}: {e.strerror}") from e
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"--out {out} is a symbolic link; name a directory")
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"--out {out} is not a directory")
    entries = os.listdir(out)
    if entries and not force:
        raise UsageError(f"--out {out} is not empty ({len(entries)} entries); --force "
                         f"replaces the export's files there ({', '.join(EXPORT_FILES)})")
    return bool(entries)


def write_out(out, force, write):
    """Calls write(staging) to fill a new directory beside `out`, then moves
    it into place: renamed over an absent or empty `out` (atomic), or, into a
    non-empty one (--force), each of EXPORT_FILES renamed over its entry (a
    link there is replaced, not followed) and an EXPORT_FILES entry the new
    export lacks removed. A failure leaves `out` as it was."""
    occupied = check_out(out, force)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out))}.export-",
                               dir=parent)
    try:
        write(staging)
        umask = os.umask(0)
        os.umask(umask)
        for name in os.listdir(staging):
            os.chmod(os.path.join(staging, name), 0o666 & ~umask)
        if not occupied:
            os.chmod(staging, 0o777 & ~umask)
            os.rename(staging, out)
            return
        source = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
        try:
            target = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as e:
            os.close(source)
            raise UsageError(f"--out {out}: {e.strerror}") from e
        try:
            written = set(os.listdir(staging))
            for name in EXPORT_FILES:
                if name in written:
                    os.replace(name, name, src_dir_fd=source, dst_dir_fd=target)
                else:
                    try:
                        os.unlink(name, dir_fd=target)
                    except FileNotFoundError:
                        pass
            os.fsync(target)
        finally:
            os.close(source)
            os.close(target)
        os.rmdir(staging)
    except OSError as e:
        raise UsageError(f"--out {out}: {e.strerror}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty --out (replacing the export's files)")
    args = parser.parse_args(argv)

    check_out(args.out, args.force)
    step = args.step
    job_id = None
    if args.job is not None:
        job = load_document("--job", args.job)
        spec = job.get("spec")
        job_id = job.get("id")
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
    check_stages_and_owner(directory, step, stages, job_id)
    parameters = read_parameters(directory, step, stages)
    check_parameters(m, parameters, directory, step)
    config, tensors = family(m, parameters)

    tokenizer = args.tokenizer
    if tokenizer is None:
        token_file = spec.get("dataset", {}).get("tokens", {}).get("path")
        beside = token_file and os.path.join(os.path.dirname(token_file), "tokenizer.json")
        tokenizer = beside if beside and os.path.isfile(beside) else None
    elif not os.path.isfile(tokenizer):
        raise UsageError(f"--tokenizer {tokenizer}: no such file")

    from safetensors.torch import save_file

    def write(staging):
        save_file(tensors, os.path.join(staging, "model.safetensors"),
                  metadata={"format": "pt"})
        with open(os.path.join(staging, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
        if tokenizer is not None:
            shutil.copyfile(tokenizer, os.path.join(staging, "tokenizer.json"))

    write_out(args.out, args.force, write)
    print(f"export: step {step} of {stages} stage(s), {len(tensors)} tensors, "
          f"{config['architectures'][0]}{', tokenizer.json' if tokenizer else ''} -> {args.out}")
    return 0


if __name__ == "__main__":
    run("export", main)
