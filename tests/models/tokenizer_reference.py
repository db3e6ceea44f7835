#!/usr/bin/env python3
"""Train a small reference tokenizer and record how it encodes test texts.

Usage: tokenizer_reference.py KIND TRAIN_TXT HELDOUT_TXT OUT_DIR

KIND is one of
  spm          sentencepiece BPE with byte fallback (GGUF tokenizer model "llama")
  bpe-default  byte-level BPE, GPT-2 pre-tokenizer regex     (model "gpt2", pre "default")
  bpe-llama    byte-level BPE, Llama-3 pre-tokenizer regex   (model "gpt2", pre "llama-bpe")
  bpe-qwen2    byte-level BPE, Qwen2 pre-tokenizer regex     (model "gpt2", pre "qwen2")
  bpe-smollm   byte-level BPE, digits apart then GPT-2's     (model "gpt2", pre "smollm")

Writes into OUT_DIR:
  tokenizer.gguf  a GGUF file with only tokenizer metadata (no tensors), laid
                  out as the common GGUF converters write such vocabularies;
  reference.json  {"texts": [...], "ids": [[...], ...], "special_texts": [...],
                  "special_ids": [...]}: ids[i] is what the
                  reference library produces for texts[i], no special tokens.

The texts are every held-out line, then multi-line "documents" built from
consecutive held-out lines, then a few edge cases. Everything is
deterministic for a given pair of input files.
"""

import json
import random
import sys
from pathlib import Path

import gguf

KINDS = ("spm", "bpe-default", "bpe-llama", "bpe-qwen2", "bpe-smollm")

# GGUF token types (the numbering of tokenizer.ggml.token_type).
TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNUSED, TYPE_BYTE = 1, 2, 3, 4, 5, 6

BOS_TEXT, EOS_TEXT = "<|begin_of_text|>", "<|end_of_text|>"

# Pre-tokenizer split patterns of the Llama-3 and Qwen2 tokenizers; they differ
# only in how digits are grouped (runs of up to three versus one at a time).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

EDGE_TEXTS = [
    "", " ", "  ", "\n", "\t\t", "a", " a", "hello  world",
    "\u0301",                                   # a combining acute accent on its own
    "\U0001F600",                               # a single emoji
    "\r\n", "a\n", " \n ", "don't", "'s", "1234567890",
]


def fail(message):
    print(f"tokenizer_reference.py: {message}", file=sys.stderr)
    sys.exit(1)


def read_lines(path):
    """The file's lines without their "\\n"; the file must end in "\\n"."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read {path}: {e}")
    if text and not text.endswith("\n"):
        fail(f"{path} does not end with a newline")
    return text.split("\n")[:-1] if text else []


def build_texts(heldout):
    """Held-out lines, then 200 multi-line documents, then edge cases."""
    rng = random.Random(20261204)
    documents = []
    for _ in range(200):
        count = rng.randint(1, 30)
        start = rng.randrange(max(1, len(heldout) - count + 1))
        chunk = heldout[start:start + count]
        r = rng.random()
        joiner = "\r\n" if r < 0.15 else "\n\n" if r < 0.30 else "\n"
        doc = joiner.join(chunk)
        if rng.random() < 0.25:
            doc += "\n"
        documents.append(doc)
    return heldout + documents + EDGE_TEXTS


# --------------------------------------------------------------------------
# sentencepiece
# --------------------------------------------------------------------------

def train_spm(train_lines, out_dir):
    import io
    import os
    import sentencepiece as spm

    model = io.BytesIO()
    with open(os.devnull, "w") as devnull:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(train_lines),
            model_writer=model,
            logstream=devnull,   # the trainer is chatty on stderr
            model_type="bpe",
            vocab_size=2000,
            byte_fallback=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            add_dummy_prefix=True,
            split_digits=True,
            character_coverage=0.9995,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            allow_whitespace_only_pieces=True,
            max_sentence_length=1 << 16,
            num_threads=2,
        )
    (out_dir / "spm.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = []
    for i in range(n):
        # No user_defined_symbols are passed to the trainer, so type 4 never
        # occurs (the Python API has no is_user_defined to tell it apart).
        if sp.is_unknown(i):
            types.append(TYPE_UNKNOWN)
        elif sp.is_control(i):
            types.append(TYPE_CONTROL)
        elif sp.is_unused(i):
            types.append(TYPE_UNUSED)
        elif sp.is_byte(i):
            types.append(TYPE_BYTE)
        else:
            types.append(TYPE_NORMAL)

    writer = gguf.GGUFWriter(str(out_dir / "tokenizer.gguf"), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    write_gguf(writer)

    return (lambda text: sp.encode(text)), (lambda ids: sp.decode(ids)), n


# --------------------------------------------------------------------------
# tokenizers (byte-level BPE)
# --------------------------------------------------------------------------

def train_bpe(kind, train_lines, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(ignore_merges=(kind == "bpe-llama")))
    if kind == "bpe-default":
        # use_regex=True applies the GPT-2 split pattern inside ByteLevel.
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        pre = "default"
    elif kind == "bpe-smollm":
        # Every digit apart first, then the GPT-2 pattern on what lies between.
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
        pre = "smollm"
    else:
        pattern = LLAMA3_PATTERN if kind == "bpe-llama" else QWEN2_PATTERN
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        pre = "llama-bpe" if kind == "bpe-llama" else "qwen2"
    tok.decoder = decoders.ByteLevel()

    trainer = trainers.BpeTrainer(
        vocab_size=3000,
        special_tokens=[BOS_TEXT, EOS_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Training on runs of lines joined as in a file, so that line breaks and the
    # whitespace around them take part in merges too.
    chunks = ["\n".join(train_lines[i:i + 8]) + "\n" for i in range(0, len(train_lines), 8)]
    tok.train_from_iterator(chunks, trainer)
    saved = tok.to_str()
    (out_dir / "tokenizer.json").write_text(saved, encoding="utf-8")

    vocab = tok.get_vocab(with_added_tokens=True)
    n = len(vocab)
    tokens = [None] * n
    for text, i in vocab.items():
        if not 0 <= i < n or tokens[i] is not None:
            fail(f"token ids are not a dense 0..{n - 1} range (id {i})")
        tokens[i] = text
    bos, eos = vocab[BOS_TEXT], vocab[EOS_TEXT]
    types = [TYPE_CONTROL if i in (bos, eos) else TYPE_NORMAL for i in range(n)]

    # Merges in rank order. Recent versions store each as a [left, right]
    # pair, older ones as a single "left right" string.
    merges = [m if isinstance(m, str) else " ".join(m)
              for m in json.loads(saved)["model"]["merges"]]

    writer = gguf.GGUFWriter(str(out_dir / "tokenizer.gguf"), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(kind == "bpe-llama")
    writer.add_add_eos_token(False)
    write_gguf(writer)

    def encode(text):
        return tok.encode(text, add_special_tokens=False).ids

    def decode(ids):
        return tok.decode(ids, skip_special_tokens=False)

    return encode, decode, n


def write_gguf(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv):
    if len(argv) != 5 or argv[1] not in KINDS:
        fail(f"usage: {Path(argv[0]).name} {{{'|'.join(KINDS)}}} TRAIN_TXT HELDOUT_TXT OUT_DIR")
    kind, train_path, heldout_path, out_dir = argv[1], argv[2], argv[3], Path(argv[4])
    out_dir.mkdir(parents=True, exist_ok=True)

    train_lines = read_lines(train_path)
    heldout = read_lines(heldout_path)
    if not train_lines or not heldout:
        fail("empty training or held-out text")

    if kind == "spm":
        encode, decode, vocab_size = train_spm(train_lines, out_dir)
    else:
        encode, decode, vocab_size = train_bpe(kind, train_lines, out_dir)

    texts = build_texts(heldout)
    ids = [encode(t) for t in texts]
    # Every text should decode back to itself; a reference that can't
    # round-trip its own output is not one worth testing against.
    bad = [i for i, (t, e) in enumerate(zip(texts, ids)) if decode(e) != t]
    if bad:
        fail(f"{len(bad)} texts do not round-trip, first {texts[bad[0]]!r} -> {decode(ids[bad[0]])!r}")

    # Texts with the control tokens written in them. tokenizers finds its special
    # tokens in any text (so these compare with Switchyard's parse_special);
    # sentencepiece never does (they compare with plain encoding).
    bos, eos = ("<s>", "</s>") if kind == "spm" else (BOS_TEXT, EOS_TEXT)
    rng = random.Random(7)
    special_texts = [f"{bos}{heldout[0]}", f"{heldout[1]}{eos}", f"a{bos}{bos} b {eos}\n{bos}",
                     f"{bos[:-1]} {eos}{eos[1:]}"]
    for _ in range(40):
        a, b = rng.sample(heldout, 2)
        special_texts.append(f"{a}{rng.choice([bos, eos, ' ' + bos + ' '])}{b}")
    special_ids = [encode(t) for t in special_texts]

    with open(out_dir / "reference.json", "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "ids": ids, "special_texts": special_texts,
                   "special_ids": special_ids}, f, ensure_ascii=False)
    print(f"{kind}: vocab {vocab_size}, {len(texts)} texts, {sum(map(len, ids))} tokens")


if __name__ == "__main__":
    main(sys.argv)
