#!/usr/bin/python3
"""The tokenizer reference tests' corpus: at least 2,000 texts made from a
fixed seed, one JSON value per line: a string, or (for text that is not
valid UTF-8) an array of its bytes.

usage: make_corpus.py OUT.jsonl [--count N] [--seed S]

Kinds: sentences in many scripts and languages; emoji with skin tones,
flags, keycaps and ZWJ sequences; code; runs of spaces, tabs, newlines and
Unicode white space; digits; special tokens of several tokenizers inside
text (and broken ones); contractions and case; combining marks and
decomposed text (for NFC); random code points (assigned in Python's
Unicode, which node's ICU also has); long words without a space; invalid
UTF-8 (stray and truncated sequences, overlongs, surrogates' UTF-8, bytes
F5-FF) and NUL bytes; and mixtures of all of these."""
import json
import random
import sys
import unicodedata

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you doing today?",
    "I'm sure they'll say it's fine, but we've seen what'd happen.",
    "DON'T SHOUT. I'LL HEAR YOU. THEY'RE HERE. WE'VE GOT IT. HE'D KNOW.",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein. Straße, Größe, Fußgänger.",
    "¿Dónde está la biblioteca? ¡Qué día más bonito! Año, niño, pingüino.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "الخط العربي جميل جدا، وهو فن قديم. ٠١٢٣٤٥٦٧٨٩",
    "עברית נכתבת מימין לשמאל, עם ניקוד: שָׁלוֹם.",
    "हिन्दी भारत की एक भाषा है। १२३४ नमस्ते दुनिया",
    "বাংলা ভাষা খুব মিষ্টি। আমি তোমাকে ভালোবাসি।",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ",
    "我能吞下玻璃而不伤身体。中华人民共和国成立于1949年。",
    "日本語の文章です。カタカナとひらがな、そして漢字。ｶﾀｶﾅ半角も。",
    "한국어 문장입니다. 다람쥐 헌 쳇바퀴에 타고파.",
    "Tiếng Việt có dấu: Trăm năm trong cõi người ta, chữ tài chữ mệnh khéo là ghét nhau.",
    "Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul, ısı, Iğdır.",
    "ქართული ენა ძალიან ლამაზია.",
    "Հայերենը հնդեվրոպական լեզու է։",
    "አማርኛ የኢትዮጵያ ቋንቋ ነው።",
    "தமிழ் ஒரு பழமையான மொழி.",
    "తెలుగు భాష చాలా మధురమైనది.",
    "ꯃꯤꯇꯩꯂꯣꯟ Ελληνικά ᏣᎳᎩ ᓀᐦᐃᔭᐍᐏᐣ ߒߞߏ",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Ærøskøbing på Ærø. Ångström. Þetta er íslenska.",
    "Mathematics: ∀x∈ℝ, ∃y: x² + y² ≥ 0 ⇒ √(x²) = |x|; ∫₀^∞ e^{-x} dx = 1.",
    "Currency: $100, €50, £20, ¥1000, ₹500, ₿0.5 — prices “quoted” ‘here’…",
    "Ligatures ﬁ ﬂ, full-width ＡＢＣ１２３, superscripts ¹²³, fractions ½ ¼.",
]

EMOJI = [
    "😀", "😂", "🥲", "👍", "👍🏽", "👋🏿", "🇫🇷", "🇯🇵", "🏳️‍🌈", "🏴‍☠️", "👨‍👩‍👧‍👦",
    "👩🏽‍💻", "🧑‍🤝‍🧑", "❤️", "❤️‍🔥", "1️⃣", "#️⃣", "🫠", "🐈‍⬛", "👁️‍🗨️", "🤷‍♀️",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "✊🏾", "🧔‍♂️", "☺︎", "☺️",
]

CODE = [
    "int main(int argc, char **argv) {\n    printf(\"%d\\n\", argc);\n    return 0;\n}\n",
    "def f(x):\n\treturn [i ** 2 for i in range(x) if i % 3 == 0]  # squares\n",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "<html><body class=\"main\"><p>Hello &amp; welcome</p></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * 2).collect(); println!(\"{:?}\", v); }",
    "const re = /^[a-z0-9_-]{3,16}$/; x => x?.y ?? z; a !== b && c || d;",
    "    if (x) {\n        y++;\n    }\r\n\r\n\t\t// tabs\n",
    "git commit -m \"fix: handle\\ttabs\" && make -j8 2>&1 | tee log.txt",
    "https://example.com/path?query=1&b=%20x#frag user@example.org 192.168.0.1:8080",
]

SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|reserved_special_token_5|>", "<|im_start|>", "<|im_end|>",
    "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|vision_pad|>", "<|fim_prefix|>",
    "<|im_start", "<|", "|>", "<|begin_of_text", "<|im_end|", "<s>", "</s>", "[INST]",
]

WHITESPACE = [" ", " ", " ", "\t", "\n", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028",
              "\u2029", "\ufeff", "\u0085", "\u000b", "\u000c", "\u200b", "\u2003", "\u202f",
              "\u1680", "\u180e"]

COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0323", "\u1100\u1161\u11a8", "A\u030a",
             "n\u0303", "\u0915\u093c", "u\u031b\u0301", "Å", "é", "\u212b", "\u2126",
             "\u00c5\u0301", "s\u0323\u0307", "\u1e9b\u0323"]

WORDS = ["token", "izer", "über", "naïve", "café", "résumé", "x", "Δ", "漢", "字", "ab", "the",
         "Straße", "ǅ", "ﬀ", "İ", "ı", "ſ", "K"]


def assigned_chars(rng, n):
    out = []
    while len(out) < n:
        r = rng.random()
        cp = rng.randrange(0x20, 0x3000) if r < 0.6 else rng.randrange(0x3000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        cat = unicodedata.category(chr(cp))
        if cat in ("Cn", "Co", "Cs"):
            continue
        out.append(chr(cp))
    return "".join(out)


def invalid_bytes(rng):
    pieces = [
        b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
        b"\xf4\x90\x80\x80", b"\xf5\x80", b"\x80", b"\xbf", b"\xe2\x82", b"\xf0\x9f\x98",
        b"\xc3", b"\x00", b"\x00\x00", b"\xe2\x28\xa1", b"\xf0\x28\x8c\x28", b"\xc1\xbf",
    ]
    out = b""
    for _ in range(rng.randrange(1, 6)):
        k = rng.random()
        if k < 0.4:
            out += rng.choice(pieces)
        elif k < 0.7:
            out += rng.choice(SENTENCES).encode()[: rng.randrange(1, 40)]
        else:
            out += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
    return out


def whitespace_run(rng):
    return "".join(rng.choice(WHITESPACE) for _ in range(rng.randrange(1, 12)))


def digits(rng):
    k = rng.random()
    if k < 0.3:
        return str(rng.randrange(10 ** rng.randrange(1, 20)))
    if k < 0.6:
        return "%d.%0*d" % (rng.randrange(10000), rng.randrange(1, 6), rng.randrange(100000))
    if k < 0.8:
        return "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 60)))
    return rng.choice(["١٢٣", "४५६", "①②③", "Ⅻ", "๑๒๓", "１２３", "0x1F", "1e-9", "3,141,592"])


def long_word(rng):
    base = rng.choice(["a", "ab", "xyz", "ä", "漢字", "😀", "-", "_", "0", "Ġ", "é", "'s"])
    n = rng.randrange(100, 3000)
    if rng.random() < 0.5:
        return base * (n // len(base))
    return "".join(rng.choice(WORDS) for _ in range(n // 5))


def mixture(rng, parts):
    return "".join(rng.choice(parts)(rng) for _ in range(rng.randrange(2, 8)))


def make(count, seed):
    rng = random.Random(seed)
    gens = [
        lambda r: r.choice(SENTENCES),
        lambda r: " ".join(r.choice(SENTENCES) for _ in range(r.randrange(1, 4))),
        lambda r: "".join(r.choice(EMOJI + [" ", "", "a"]) for _ in range(r.randrange(1, 10))),
        lambda r: r.choice(CODE),
        whitespace_run,
        lambda r: r.choice(WORDS) + whitespace_run(r) + r.choice(WORDS),
        digits,
        lambda r: r.choice(SENTENCES)[: r.randrange(40)] + r.choice(SPECIALS) + whitespace_run(r)
        * (r.random() < 0.5) + r.choice(SPECIALS) + r.choice(SENTENCES)[r.randrange(40):],
        lambda r: "".join(r.choice(COMBINING + WORDS + [" "]) for _ in range(r.randrange(1, 12))),
        lambda r: assigned_chars(r, r.randrange(1, 30)),
        long_word,
        invalid_bytes,
        lambda r: mixture(r, [
            lambda q: q.choice(SENTENCES), lambda q: q.choice(EMOJI), lambda q: q.choice(SPECIALS),
            whitespace_run, digits, lambda q: q.choice(CODE), lambda q: q.choice(COMBINING),
            lambda q: assigned_chars(q, 5), lambda q: q.choice(["'s", "'S", "'ll", "'LL", "'ve",
                                                                 "n't", "'", "''", "'ſ"])]),
        lambda r: (r.choice(SENTENCES) + "\x00" + r.choice(WORDS)),
    ]
    out = ["", " ", "\n", "a", "<|begin_of_text|>", "<|im_start|>user\nhi<|im_end|>\n"]
    i = 0
    while len(out) < count:
        out.append(gens[i % len(gens)](rng))
        i += 1
    return out


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    count, seed = 2400, 46
    while args:
        flag = args.pop(0)
        if flag == "--count":
            count = int(args.pop(0))
        elif flag == "--seed":
            seed = int(args.pop(0))
    with open(path, "w") as f:
        for x in make(count, seed):
            if isinstance(x, bytes):
                try:
                    x = x.decode("utf-8")
                except UnicodeDecodeError:
                    f.write(json.dumps(list(x)) + "\n")
                    continue
            f.write(json.dumps(x, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
