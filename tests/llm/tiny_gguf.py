"""Writes a tiny Llama model with random weights as GGUF, for the LLM server in the tests.

Usage: python tiny_gguf.py OUT.gguf

The model is llama.cpp's `llama` architecture at toy size (4 layers, 128 wide, 4 heads, a
context of 512), in float32: about 4 MB, generated from a fixed seed, so every run writes the same
file. Its tokenizer is SentencePiece-style with byte fallback: three control tokens and the 256
byte tokens, so any text tokenizes. Its chat template is ChatML. The output row of the
end-of-sequence token is zero while the others are random, so greedy decoding practically never
stops early: a request gets the `max_tokens` it asked for, one server-sent event per token.
Nothing is downloaded.
"""

import sys

import gguf
import numpy as np

N_EMBD = 128
N_HEAD = 4
N_LAYER = 4
N_FF = 384
N_CTX = 512
SEED = 25

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def vocab():
    """Tokens, scores and types: <unk>, <s>, </s>, then the 256 bytes as <0xNN>."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    scores = [0.0] * len(tokens)
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    return tokens, scores, types


def main(out):
    rng = np.random.default_rng(SEED)
    tokens, scores, types = vocab()
    n_vocab = len(tokens)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    writer = gguf.GGUFWriter(out, "llama")
    writer.add_name("skiff-tiny-llama")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHATML)

    output = weight(n_vocab, N_EMBD) * 4
    output[2] = 0.0
    writer.add_tensor("token_embd.weight", weight(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_gguf.py OUT.gguf")
    main(sys.argv[1])
