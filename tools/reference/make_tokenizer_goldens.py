#!/usr/bin/env python3
"""Tokenizer goldens for tests/test_tokenizer.cpp, from the HF reference tokenizer.

Loads the official Qwen2 tokenizer files (vocab.json, merges.txt, tokenizer_config.json) with
transformers' AutoTokenizer, encodes each prompt of the corpus verbatim (add_special_tokens=False, no chat
template) and writes {prompt: ids}. Also writes <out>.meta.json: the tokenizer class, its length, the ids of
the special/added tokens, the backend normalizer / pre-tokenizer, decode(encode(x)) for every prompt, and a
cross-check against a tokenizers.Tokenizer assembled by hand (NFC, Qwen2 split regex, byte level, BPE).

    python3 make_tokenizer_goldens.py --tokenizer DIR --corpus corpus.json --out goldens.json
"""
import argparse
import json
import os
import sys

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def hand_built(tok_dir, specials):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import AddedToken

    bpe = models.BPE.from_file(os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"))
    t = Tokenizer(bpe)
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    t.decoder = decoders.ByteLevel()
    for tid, content, special in specials:
        t.add_special_tokens([AddedToken(content, special=special, normalized=False)]) if special else \
            t.add_tokens([AddedToken(content, special=False, normalized=False)])
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.corpus, encoding="utf-8") as f:
        corpus = json.load(f)
    if len(set(corpus)) != len(corpus):
        sys.exit("corpus has duplicate prompts")

    from transformers import AutoTokenizer
    import transformers
    import tokenizers

    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    goldens = {p: tok.encode(p, add_special_tokens=False) for p in corpus}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=0)

    with open(os.path.join(a.tokenizer, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    names = [v["content"] for v in cfg.get("added_tokens_decoder", {}).values()]
    names += [n for n in cfg.get("additional_special_tokens", []) if n not in names]
    meta = {
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "class": type(tok).__name__,
        "len": len(tok),
        "special_ids": {n: tok.convert_tokens_to_ids(n) for n in names},
        "decoded": {p: tok.decode(ids) for p, ids in goldens.items()},
    }
    backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None)
    if backend is not None:
        j = json.loads(backend.to_str())
        meta["normalizer"] = j.get("normalizer")
        meta["pre_tokenizer"] = j.get("pre_tokenizer")
        meta["added_tokens"] = j.get("added_tokens")
    try:
        specials = sorted((i, n, True) for n, i in meta["special_ids"].items())
        hb = hand_built(a.tokenizer, specials)
        diff = [p for p in corpus if hb.encode(p).ids != goldens[p]]
        meta["hand_built_mismatches"] = diff
    except Exception as e:  # the cross-check is advisory
        meta["hand_built_error"] = repr(e)
    with open(a.out.replace(".json", "") + ".meta.json", "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
    print(f"{len(goldens)} prompts, {sum(len(v) for v in goldens.values())} tokens, class {meta['class']}, "
          f"len {meta['len']}, hand-built mismatches {len(meta.get('hand_built_mismatches', []))}")


if __name__ == "__main__":
    main()
