"""scripts/export's checks, on small checkpoints written here (LibTorch's
archive format, as worker/data/checkpoint.cc writes it, with owner files):
what it exports (the spec's tensors by name and shape, the step's stage files
and their owner) and where (an empty or absent --out, --force into a
non-empty one, never through a symbolic link, atomically). No daemons: the
exporter runs in this process.

    export_checks_test.py REPO_ROOT SCRATCH_DIR
"""

import json
import os
import shutil
import sys
import unittest

import torch

REPO, SCRATCH = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(REPO, "scripts", "hf"))
import export  # noqa: E402  (scripts/hf/export.py)
from hf_cli import UsageError  # noqa: E402

HIDDEN, HEADS, VOCAB, SEQ, FFN = 8, 2, 16, 4, 32
STEP = 3


def gpt_spec(layers, stages, directory, hidden=HIDDEN):
    return {"model": {"architecture": "gpt", "layers": layers, "hidden": hidden, "heads": HEADS,
                      "vocab": VOCAB, "seq_len": SEQ, "ffn_hidden": FFN},
            "pipeline": {"stages": stages},
            "checkpoint": {"directory": directory}}


def gpt_stage_tensors(layers, stages, stage, hidden=HIDDEN):
    """The parameters of `stage` of a gpt of `layers` blocks split evenly over
    `stages` (worker/model/gpt.cc's names and shapes), plus AdamW state."""
    h = hidden
    tensors = {}
    if stage == 0:
        tensors["embed.token"] = torch.randn(VOCAB, h)
        tensors["embed.position"] = torch.randn(SEQ, h)
    per = layers // stages
    for layer in range(stage * per, (stage + 1) * per):
        p = f"block{layer}."
        for norm in ("ln1", "ln2"):
            tensors[p + norm + ".weight"] = torch.ones(h)
            tensors[p + norm + ".bias"] = torch.zeros(h)
        for part, out, inner in (("attn.qkv", 3 * h, h), ("attn.proj", h, h),
                                 ("mlp.fc", FFN, h), ("mlp.proj", h, FFN)):
            tensors[f"{p}{part}.weight"] = torch.randn(out, inner)
            tensors[f"{p}{part}.bias"] = torch.zeros(out)
    if stage == stages - 1:
        tensors["final_ln.weight"] = torch.ones(h)
        tensors["final_ln.bias"] = torch.zeros(h)
        tensors["head.weight"] = torch.randn(VOCAB, h)
    for name in list(tensors):
        tensors[name + ".exp_avg"] = torch.zeros_like(tensors[name])
    tensors["optimizer.step"] = torch.tensor([STEP + 1.0])
    return tensors


def write_stage(directory, stage, tensors, owner, prefix="stage"):
    """One stage file as LibTorch's OutputArchive writes it (a module whose
    attributes are the named tensors), and its owner file; `prefix` "rank"
    names them as checkpoints written before files were named per stage."""
    step_directory = os.path.join(directory, f"step-{STEP:08d}")
    os.makedirs(step_directory, exist_ok=True)
    module = torch._C.ScriptModule("archive", torch._C.CompilationUnit(), True)
    for name, tensor in tensors.items():
        module._register_attribute(name, torch._C.TensorType.get(), tensor)
    module.save(os.path.join(step_directory, f"{prefix}-{stage:03d}.pt"))
    if owner is not None:
        with open(os.path.join(step_directory, f"{prefix}-{stage:03d}.owner"), "w") as f:
            f.write(owner + "\n")


def write_checkpoint(directory, layers, stages, owner="job-7 spec 00000000000000aa",
                     hidden=HIDDEN, prefix="stage"):
    for stage in range(stages):
        write_stage(directory, stage, gpt_stage_tensors(layers, stages, stage, hidden), owner,
                    prefix)


class ExportChecksTest(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(SCRATCH, self.id().rsplit(".", 1)[-1])
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.out = os.path.join(self.dir, "hf")

    def export(self, spec, *extra, job_id="job-7"):
        """scripts/export --job (the job as zbppctl status prints it) in this
        process; returns the summary's exit status or raises UsageError."""
        job = os.path.join(self.dir, "job.json")
        with open(job, "w") as f:
            json.dump({"id": job_id, "spec": spec, "last_checkpoint_step": str(STEP)}, f)
        return export.main(["--job", job, "--out", self.out, *extra])

    def refused(self, spec, *extra, job_id="job-7"):
        with self.assertRaises(UsageError) as raised:
            self.export(spec, *extra, job_id=job_id)
        return str(raised.exception)

    # What is exported.

    def test_a_good_checkpoint_exports_into_an_absent_directory(self):
        write_checkpoint(self.ckpt, layers=2, stages=2)
        self.assertEqual(self.export(gpt_spec(2, 2, self.ckpt)), 0)
        self.assertEqual(sorted(os.listdir(self.out)), ["config.json", "model.safetensors"])
        # Only the export beside it: no staging directory left behind.
        self.assertEqual(sorted(os.listdir(self.dir)), ["ckpt", "hf", "job.json"])

    def test_a_checkpoint_of_the_former_per_rank_names_exports(self):
        write_checkpoint(self.ckpt, layers=2, stages=2, prefix="rank")
        self.assertEqual(self.export(gpt_spec(2, 2, self.ckpt)), 0)
        self.assertEqual(sorted(os.listdir(self.out)), ["config.json", "model.safetensors"])

    def test_a_head_split_by_vocabulary_is_joined(self):
        write_checkpoint(self.ckpt, layers=2, stages=2)
        # The last stage's head as two stages' shards (pipeline.vocab_parallel).
        last = gpt_stage_tensors(2, 2, 1)
        head = last.pop("head.weight")
        del last["head.weight.exp_avg"]
        first = gpt_stage_tensors(2, 2, 0)
        first["head.weight[0:9]"], last["head.weight[9:16]"] = head[:9], head[9:]
        owner = "job-7 spec 00000000000000aa"
        write_stage(self.ckpt, 0, first, owner)
        write_stage(self.ckpt, 1, last, owner)
        parameters = export.read_parameters(self.ckpt, STEP, 2)
        self.assertTrue(torch.equal(parameters["head.weight"], head))
        self.assertNotIn("head.weight[0:9]", parameters)
        self.assertEqual(self.export(gpt_spec(2, 2, self.ckpt)), 0)

    def test_vocabulary_shards_with_a_gap_are_refused(self):
        write_checkpoint(self.ckpt, layers=2, stages=2)
        last = gpt_stage_tensors(2, 2, 1)
        head = last.pop("head.weight")
        last["head.weight[0:8]"], last["head.weight[9:16]"] = head[:8], head[9:]
        write_stage(self.ckpt, 1, last, "job-7 spec 00000000000000aa")
        message = self.refused(gpt_spec(2, 2, self.ckpt))
        self.assertIn("the vocabulary shards of head.weight do not cover its rows: [9:16] "
                      "where row 8 comes next", message)

    def test_a_spec_with_fewer_layers_names_the_tensor_it_lacks(self):
        write_checkpoint(self.ckpt, layers=2, stages=1)
        message = self.refused(gpt_spec(1, 1, self.ckpt))
        self.assertIn("holds block1.ln1.weight, which a 1-layer gpt spec does not have", message)
        self.assertFalse(os.path.exists(self.out))

    def test_a_spec_with_more_layers_names_the_missing_tensor(self):
        write_checkpoint(self.ckpt, layers=1, stages=1)
        message = self.refused(gpt_spec(2, 1, self.ckpt))
        self.assertIn("lacks block1.ln1.weight, which a 2-layer gpt spec has", message)

    def test_another_shape_is_named_with_both_shapes(self):
        write_checkpoint(self.ckpt, layers=1, stages=1, hidden=2 * HIDDEN)
        message = self.refused(gpt_spec(1, 1, self.ckpt))
        self.assertIn(f"embed.token has shape [{VOCAB}, {2 * HIDDEN}], a 1-layer gpt spec "
                      f"expects [{VOCAB}, {HIDDEN}]", message)

    def test_a_stage_file_beyond_the_specs_stages_is_refused(self):
        write_checkpoint(self.ckpt, layers=2, stages=2)
        message = self.refused(gpt_spec(2, 1, self.ckpt))
        self.assertIn("holds stage-001.pt, but the spec has 1 stage(s)", message)

    def test_another_jobs_stage_file_is_refused(self):
        write_checkpoint(self.ckpt, layers=2, stages=2)
        write_stage(self.ckpt, 1, gpt_stage_tensors(2, 2, 1), "job-9 spec 00000000000000bb")
        message = self.refused(gpt_spec(2, 2, self.ckpt))
        self.assertIn("stage-001.pt belongs to job-9, not job-7", message)
        # Not this job's at all.
        write_checkpoint(self.ckpt, layers=2, stages=2, owner="job-9 spec 00000000000000bb")
        self.assertIn("belongs to job-9, not job-7", self.refused(gpt_spec(2, 2, self.ckpt)))

    def test_stages_of_two_owners_are_refused_even_without_a_job(self):
        write_checkpoint(self.ckpt, layers=2, stages=2)
        write_stage(self.ckpt, 1, gpt_stage_tensors(2, 2, 1), "job-7 spec 00000000000000bb")
        spec = os.path.join(self.dir, "spec.json")
        with open(spec, "w") as f:
            json.dump(gpt_spec(2, 2, self.ckpt), f)
        with self.assertRaises(UsageError) as raised:
            export.main(["--spec", spec, "--out", self.out])
        self.assertIn("mixes owners", str(raised.exception))

    def test_a_stage_file_without_an_owner_file_is_refused(self):
        write_checkpoint(self.ckpt, layers=1, stages=1, owner=None)
        self.assertIn("stage-000.pt has no owner file (stage-000.owner)",
                      self.refused(gpt_spec(1, 1, self.ckpt)))

    # Where it is written.

    def test_a_non_empty_directory_is_refused_without_force(self):
        write_checkpoint(self.ckpt, layers=1, stages=1)
        os.makedirs(self.out)
        with open(os.path.join(self.out, "notes.txt"), "w") as f:
            f.write("mine")
        message = self.refused(gpt_spec(1, 1, self.ckpt))
        self.assertIn(f"--out {self.out} is not empty (1 entries); --force", message)
        self.assertEqual(os.listdir(self.out), ["notes.txt"])

    def test_force_replaces_the_exports_files_follows_no_link_and_drops_a_stale_tokenizer(self):
        write_checkpoint(self.ckpt, layers=1, stages=1)
        os.makedirs(self.out)
        for name, text in (("notes.txt", "mine"), ("tokenizer.json", "{\"stale\": 1}")):
            with open(os.path.join(self.out, name), "w") as f:
                f.write(text)
        elsewhere = os.path.join(self.dir, "elsewhere.json")
        with open(elsewhere, "w") as f:
            f.write("not yours to write")
        os.symlink(elsewhere, os.path.join(self.out, "config.json"))
        self.assertEqual(self.export(gpt_spec(1, 1, self.ckpt), "--force"), 0)
        self.assertEqual(sorted(os.listdir(self.out)),
                         ["config.json", "model.safetensors", "notes.txt"])
        config = os.path.join(self.out, "config.json")
        self.assertFalse(os.path.islink(config))
        with open(config) as f:
            self.assertEqual(json.load(f)["n_layer"], 1)
        with open(elsewhere) as f:
            self.assertEqual(f.read(), "not yours to write")
        with open(os.path.join(self.out, "notes.txt")) as f:
            self.assertEqual(f.read(), "mine")

    def test_a_symbolic_link_as_out_is_refused_even_with_force(self):
        write_checkpoint(self.ckpt, layers=1, stages=1)
        target = os.path.join(self.dir, "target")
        os.makedirs(target)
        os.symlink(target, self.out)
        self.assertIn("is a symbolic link", self.refused(gpt_spec(1, 1, self.ckpt), "--force"))
        self.assertEqual(os.listdir(target), [])

    def test_an_empty_directory_is_written_and_a_failed_export_leaves_nothing(self):
        write_checkpoint(self.ckpt, layers=1, stages=1)
        os.makedirs(self.out)
        self.assertEqual(self.export(gpt_spec(1, 1, self.ckpt)), 0)
        self.assertIn("model.safetensors", os.listdir(self.out))
        # A refused export (wrong spec) leaves the directory as it was.
        before = sorted(os.listdir(self.out))
        self.refused(gpt_spec(2, 1, self.ckpt), "--force")
        self.assertEqual(sorted(os.listdir(self.out)), before)
        self.assertEqual(sorted(os.listdir(self.dir)), ["ckpt", "hf", "job.json"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
