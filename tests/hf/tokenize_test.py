"""scripts/tokenize: a byte-level BPE trained on real text, the token files
it writes (nanoGPT's format, little-endian uint16/uint32, train + held-out)
decoding back to the text, a user's tokenizer.json reused, bad arguments
refused with exit 2 and one line.

    tokenize_test.py REPO_ROOT SCRATCH_DIR
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

REPO, SCRATCH = sys.argv[1], sys.argv[2]
TOKENIZE = os.path.join(REPO, "scripts", "tokenize")


def run(*args):
    return subprocess.run([TOKENIZE, *args], capture_output=True, text=True, timeout=120)


def genesis():
    """Genesis from the King James Bible (bible-kjv): ~200 KB of real text."""
    return subprocess.run(["/usr/bin/bible", "gen1:1-gen50:26"], check=True,
                          capture_output=True).stdout.decode()


class TokenizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(SCRATCH, ignore_errors=True)
        os.makedirs(SCRATCH)
        cls.text = genesis()
        cls.text_file = os.path.join(SCRATCH, "genesis.txt")
        with open(cls.text_file, "w") as f:
            f.write(cls.text)

    def test_trains_writes_and_decodes_back_to_the_text(self):
        out = os.path.join(SCRATCH, "bpe512")
        result = run("--out", out, "--vocab", "512", "--text", self.text_file,
                     "--eval-fraction", "0.05")
        self.assertEqual(result.returncode, 0, result.stderr)
        tokenizer = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        self.assertEqual(tokenizer.get_vocab_size(), 512)
        train = np.fromfile(os.path.join(out, "train.bin"), dtype="<u2")
        val = np.fromfile(os.path.join(out, "val.bin"), dtype="<u2")
        self.assertEqual(os.path.getsize(os.path.join(out, "train.bin")), 2 * len(train))
        total = len(train) + len(val)
        self.assertEqual(len(val), int(total * 0.05))
        self.assertLess(int(max(train.max(), val.max())), 512)
        # BPE compresses: far fewer ids than bytes, and merges were used.
        self.assertLess(total, len(self.text.encode()) / 2)
        self.assertGreater(int(train.max()), 256)
        # Lossless: train then val decode to the whole text.
        ids = np.concatenate([train, val]).tolist()
        self.assertEqual(tokenizer.decode(ids), self.text)
        # The spec lines it prints point at the files, with the vocabulary.
        self.assertIn(f'path: {json.dumps(os.path.join(out, "train.bin"))}', result.stdout)
        self.assertIn(f'eval_path: {json.dumps(os.path.join(out, "val.bin"))}', result.stdout)
        self.assertIn("dtype: uint16", result.stdout)
        self.assertIn("vocab: 512", result.stdout)

        # The tokenizer reused: the same ids again.
        again = os.path.join(SCRATCH, "reused")
        result = run("--out", again, "--tokenizer", os.path.join(out, "tokenizer.json"),
                     "--text", self.text_file, "--eval-fraction", "0.05")
        self.assertEqual(result.returncode, 0, result.stderr)
        for name in ("train.bin", "val.bin"):
            with open(os.path.join(out, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_a_vocabulary_past_uint16_writes_uint32(self):
        # A word-level tokenizer of 70,000 entries: the text's words get the
        # top ids, which need 4 bytes.
        words = sorted(set(self.text.split()))
        vocab = {f"<filler{i}>": i for i in range(70000 - len(words) - 1)}
        vocab["[UNK]"] = len(vocab)
        for word in words:
            vocab[word] = len(vocab)
        tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        path = os.path.join(SCRATCH, "wide.json")
        tokenizer.save(path)
        out = os.path.join(SCRATCH, "wide")
        result = run("--out", out, "--tokenizer", path, "--text", self.text_file)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("dtype: uint32", result.stdout)
        train = np.fromfile(os.path.join(out, "train.bin"), dtype="<u4")
        self.assertEqual(os.path.getsize(os.path.join(out, "train.bin")), 4 * len(train))
        self.assertGreaterEqual(int(train.min()), 70000 - len(words))
        self.assertEqual(tokenizer.decode(train[:5].tolist()), " ".join(self.text.split()[:5]))

    def test_bad_arguments_exit_2_with_one_line(self):
        out = os.path.join(SCRATCH, "bad")
        latin1 = os.path.join(SCRATCH, "latin1.txt")
        with open(latin1, "wb") as f:
            f.write("caf\xe9\n".encode("latin-1"))
        cases = [
            (["--out", out, "--vocab", "100", "--text", self.text_file], "--vocab must be in"),
            (["--out", out, "--vocab", "512"], "one of the arguments --text --builtin"),
            (["--out", out, "--vocab", "512", "--text", os.path.join(SCRATCH, "none.txt")],
             "No such file"),
            (["--out", out, "--vocab", "512", "--text", latin1], "not UTF-8"),
            (["--out", out, "--vocab", "512", "--text", self.text_file, "--eval-fraction", "1"],
             "--eval-fraction must be in (0, 1)"),
            (["--out", out, "--tokenizer", self.text_file, "--text", self.text_file],
             f"--tokenizer {self.text_file}:"),
            (["--out", out, "--vocab", "512", "--tokenizer", "t.json", "--text", self.text_file],
             "not allowed with argument"),
        ]
        for args, message in cases:
            result = run(*args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertEqual(result.stdout, "", args)
            lines = result.stderr.splitlines()
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertTrue(lines[0].startswith("tokenize: "), lines[0])
            self.assertIn(message, lines[0])
        self.assertFalse(os.path.exists(os.path.join(out, "train.bin")))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
