"""Tokenizes a text corpus into the token files of a `dataset.tokens` job.

    scripts/tokenize --out DIR (--vocab N | --tokenizer FILE)
                     (--text FILE | --builtin bible-kjv) [--eval-fraction F]

Trains a byte-level BPE tokenizer of N tokens on the text (Hugging Face
`tokenizers`: the GPT-2 pre-tokenizer and byte alphabet, so that every text
encodes and decodes without loss; offline), or loads the user's
tokenizer.json, then encodes the text line by line and writes into DIR:

* train.bin, val.bin: the token ids as nanoGPT's train.bin, a flat file of
  little-endian unsigned integers with no header, uint16 when the
  vocabulary has at most 65,536 tokens, else uint32 (proto/zbpp/v1/
  job_spec.proto, TokenFileDataset). val.bin is the last F of the ids
  (default 0.01), train.bin the rest: the split the worker makes of a text
  file, made once here.
* tokenizer.json: the tokenizer (for the job's users and `zbppctl export`).

Then prints the job spec's lines for these files (dataset.tokens and the
model.vocab they need). Files are written to temporary names and renamed,
so DIR never holds a partial file under a final name.

Exit status: 0 done; 2 bad arguments or input (one line on stderr naming
the flag and the reason); 1 anything else.
"""

import json
import os
import subprocess

from hf_cli import Parser, UsageError, run

# The special token every trained tokenizer gets (GPT-2's document
# separator); ids 0.. are the special tokens, then the 256 byte symbols.
END_OF_TEXT = "<|endoftext|>"
# The worker reads the same command for dataset.builtin "bible-kjv"
# (worker/data/builtin_corpus.h).
BIBLE_COMMAND = ["/usr/bin/bible", "gen1:1-rev22:21"]
UINT16_IDS = 1 << 16


def parse_args(argv):
    parser = Parser(prog="scripts/tokenize", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for the files (created)")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--vocab", type=int, help="train a byte-level BPE tokenizer of this size")
    how.add_argument("--tokenizer", help="use this tokenizer.json instead of training one")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="a UTF-8 text file")
    source.add_argument("--builtin", choices=["bible-kjv"], help="a corpus from a Debian package")
    parser.add_argument("--eval-fraction", type=float, default=0.01,
                        help="fraction of the ids held out in val.bin, from the end (0.01)")
    args = parser.parse_args(argv)
    # The 256 byte symbols and the special token are the least a byte-level
    # BPE has; merges make up the rest.
    if args.vocab is not None and not 257 <= args.vocab <= 1 << 24:
        raise UsageError(f"--vocab must be in [257, {1 << 24}], got {args.vocab}")
    if not 0 < args.eval_fraction < 1:
        raise UsageError(f"--eval-fraction must be in (0, 1), got {args.eval_fraction}")
    return args


def read_text(args):
    if args.builtin == "bible-kjv":
        if not os.path.exists(BIBLE_COMMAND[0]):
            raise UsageError("--builtin bible-kjv: /usr/bin/bible not found; install the "
                             "Debian package bible-kjv")
        return subprocess.run(BIBLE_COMMAND, check=True, capture_output=True).stdout.decode()
    try:
        with open(args.text, "rb") as f:
            data = f.read()
        return data.decode("utf-8")
    except OSError as e:
        raise UsageError(f"--text {args.text}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise UsageError(f"--text {args.text}: not UTF-8 (byte {e.start})") from e


def make_tokenizer(args, lines):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if args.tokenizer is not None:
        try:
            return Tokenizer.from_file(args.tokenizer)
        except Exception as e:  # tokenizers raises its own Exception subclasses
            raise UsageError(f"--tokenizer {args.tokenizer}: {str(e).splitlines()[0]}") from e
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=[END_OF_TEXT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def encode(tokenizer, lines):
    """The ids of the text, line by line (lines keep their newline, so the
    ids decode to the text)."""
    import numpy as np

    encodings = tokenizer.encode_batch(lines, add_special_tokens=False)
    counts = [len(e.ids) for e in encodings]
    ids = np.empty(sum(counts), dtype=np.int64)
    at = 0
    for e, n in zip(encodings, counts):
        ids[at:at + n] = e.ids
        at += n
    return ids


def write_atomically(path, write):
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def main(argv):
    import numpy as np

    args = parse_args(argv)
    text = read_text(args)
    lines = text.splitlines(keepends=True)
    if not lines:
        raise UsageError("the text is empty")
    tokenizer = make_tokenizer(args, lines)
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    ids = encode(tokenizer, lines)
    dtype = np.dtype("<u2") if vocab <= UINT16_IDS else np.dtype("<u4")
    eval_count = int(len(ids) * args.eval_fraction)
    if eval_count < 2 or len(ids) - eval_count < 2:
        raise UsageError(f"{len(ids)} ids are too few to hold out --eval-fraction "
                         f"{args.eval_fraction}")

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    train, val = ids[:len(ids) - eval_count], ids[len(ids) - eval_count:]
    write_atomically(os.path.join(out, "train.bin"), lambda f: f.write(train.astype(dtype).tobytes()))
    write_atomically(os.path.join(out, "val.bin"), lambda f: f.write(val.astype(dtype).tobytes()))
    write_atomically(os.path.join(out, "tokenizer.json"),
                     lambda f: f.write(tokenizer.to_str().encode()))
    width = "uint16" if dtype.itemsize == 2 else "uint32"
    print(f"# {len(train)} train and {len(val)} held-out ids of a {vocab}-token vocabulary "
          f"({width}), {len(text.encode())} bytes of text")
    # YAML for the job spec (paths as JSON strings, which YAML reads alike).
    print("dataset:\n  tokens:")
    print(f"    path: {json.dumps(os.path.join(out, 'train.bin'))}")
    print(f"    eval_path: {json.dumps(os.path.join(out, 'val.bin'))}")
    print(f"    dtype: {width}")
    print(f"model:  # with the rest of the model's fields\n  vocab: {vocab}")
    return 0


if __name__ == "__main__":
    run("tokenize", main)
