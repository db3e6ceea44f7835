"""A small llama model with a byte-level BPE tokenizer, written with the `gguf`
package (random weights), for the tests of the switchyard package."""

import math

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

DIM, BLOCKS, HEADS, KV_HEADS, FF = 64, 2, 4, 2, 96


def byte_alphabet():
    """The byte-level BPE alphabet: printable bytes stand for themselves, the
    other 68 for U+0100 onwards, in order."""
    chars, extra = [], 256
    for b in range(256):
        if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174:
            chars.append(chr(b))
        else:
            chars.append(chr(extra))
            extra += 1
    return chars


def tokenizer_vocabulary():
    tokens = byte_alphabet()
    space = tokens[ord(" ")]
    merges = []
    for left, right in [("t", "h"), ("th", "e"), (space, "th"), (space + "th", "e"), ("i", "n"),
                        ("a", "n"), ("e", "r"), ("o", "n"), (space, "a"), (space + "a", "n")]:
        merges.append(f"{left} {right}")
        tokens.append(left + right)
    tokens += ["<|begin_of_text|>", "<|end_of_text|>"]
    return tokens, merges


@pytest.fixture(scope="session")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.gguf"
    rng = np.random.default_rng(5)
    tokens, merges = tokenizer_vocabulary()
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(128)
    w.add_embedding_length(DIM)
    w.add_block_count(BLOCKS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 2) + [3, 3])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab - 2)
    w.add_eos_token_id(vocab - 1)
    w.add_add_bos_token(True)

    def matrix(rows, cols):
        return (rng.uniform(-1, 1, size=(rows, cols)) * math.sqrt(3.0 / cols)).astype(np.float32)

    def norm(n):
        return (1.0 + rng.uniform(-0.1, 0.1, size=n)).astype(np.float32)

    head = DIM // HEADS
    w.add_tensor("token_embd.weight", matrix(vocab, DIM))
    for b in range(BLOCKS):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", norm(DIM))
        w.add_tensor(p + "attn_q.weight", matrix(DIM, DIM))
        w.add_tensor(p + "attn_k.weight", matrix(head * KV_HEADS, DIM))
        w.add_tensor(p + "attn_v.weight", matrix(head * KV_HEADS, DIM))
        w.add_tensor(p + "attn_output.weight", matrix(DIM, DIM))
        w.add_tensor(p + "ffn_norm.weight", norm(DIM))
        w.add_tensor(p + "ffn_gate.weight", matrix(FF, DIM))
        w.add_tensor(p + "ffn_up.weight", matrix(FF, DIM))
        w.add_tensor(p + "ffn_down.weight", matrix(DIM, FF))
    w.add_tensor("output_norm.weight", norm(DIM))
    w.add_tensor("output.weight", matrix(vocab, DIM))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)
