// The reference side of the tokenizer tests: transformers.js's tokenizers
// (@lenml/tokenizers) on a corpus, one JSON value per line in and out.
//
// usage: node reference.js NODE_MODULES TOKENIZER_DIR CORPUS.jsonl OUT.jsonl
//
// Each corpus line is a string, or an array of bytes (text that is not
// valid UTF-8: the reference reads it as node's UTF-8 decoder makes it, each
// ill-formed sequence one U+FFFD). Each output line is
//   {"ids": [...], "special": [...], "decoded": "..."}
// (ids without and with the special tokens; decoded: decode(ids), null for
// no ids, which the reference refuses), and after the corpus, for decoding
// alone, 300 lines {"decode": [ids], "text": "...", "skip": "..."} of
// random ids (out of range ones, special tokens and cut characters among
// them; skip: with skip_special_tokens).
"use strict";
const fs = require("fs");
const path = require("path");
const [nodeModules, dir, corpusPath, outPath] = process.argv.slice(2);
const { TokenizerLoader } = require(path.resolve(nodeModules, "@lenml/tokenizers"));
const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
const json = read("tokenizer.json");
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: json,
  tokenizerConfig: read("tokenizer_config.json"),
});
const out = [];
for (const line of fs.readFileSync(corpusPath, "utf8").split("\n")) {
  if (!line) continue;
  const v = JSON.parse(line);
  const text = Array.isArray(v) ? Buffer.from(v).toString("utf8") : v;
  const ids = tok.encode(text, { add_special_tokens: false });
  const special = tok.encode(text, { add_special_tokens: true });
  const decoded = ids.length ? tok.decode(ids) : null;
  out.push(JSON.stringify({ ids, special, decoded }));
}
// random id sequences for decoding alone (a fixed linear congruential
// generator: the same lines on every run)
let seed = 46;
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
const vocab = Object.keys(json.model.vocab).length;
const added = (json.added_tokens || []).map((t) => t.id);
for (let k = 0; k < 300; k++) {
  const n = 1 + rand(12);
  const ids = [];
  for (let i = 0; i < n; i++) {
    const r = rand(100);
    if (r < 70) ids.push(rand(vocab));
    else if (r < 80) ids.push(rand(512)); // single bytes: cut characters
    else if (r < 92 && added.length) ids.push(added[rand(added.length)]);
    else ids.push(vocab + added.length + rand(1000)); // no such token
  }
  out.push(JSON.stringify({
    decode: ids,
    text: tok.decode(ids),
    skip: tok.decode(ids, { skip_special_tokens: true }),
  }));
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
