/* libFuzzer target for the text layer (tests/fuzz/CMakeLists.txt builds it
 * as fuzz_tokenizer). The first byte of an input picks what the rest is:
 * - even: text, encoded (with and without special tokens) by a built-in
 *   byte-level BPE tokenizer shaped like Llama 3's (NFC, a Split with Llama
 *   3's regex, ByteLevel, added tokens with lstrip/rstrip, a template), then
 *   decoded, which must give well-formed UTF-8; the same bytes read as ids
 *   are decoded too;
 * - odd: a tokenizer.json, loaded (and, when it loads, used on a fixed
 *   text): whatever it holds, loading ends in a status, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/text.h"
#include "packrat/text.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

static char dir[64];
static pr_tokenizer_t *builtin;

static void remove_dir(void) {
  char path[96];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  unlink(path);
  rmdir(dir);
}

static void write_file(const char *text, size_t len) {
  char path[96];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(text, 1, len, f) != len) abort();
  fclose(f);
}

/* The built-in tokenizer: the 256 bytes (id = byte), a few merges, two
 * added tokens. */
static void make_builtin(void) {
  static const char *const extra[] = {"aa", "aaaa", "He", "ll", "llo", "\xc4\xa0w", "in"};
  static const char *const merges[] = {"a a", "aa aa", "H e", "l l", "ll o", "\xc4\xa0 w", "i n"};
  size_t cap = 1 << 16, n = 0;
  char *j = malloc(cap);
  if (!j) abort();
  n += (size_t)snprintf(j + n, cap - n, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
  for (unsigned b = 0; b < 256; b++) {
    char c[4];
    size_t k = pr_text__utf8_put(pr_text__byte_cp(b), c);
    n += (size_t)snprintf(j + n, cap - n, "%s\"%s%.*s\": %u", b ? ", " : "",
                          c[0] == '"' || c[0] == '\\' ? "\\" : "", (int)k, c, b);
  }
  for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
    n += (size_t)snprintf(j + n, cap - n, ", \"%s\": %zu", extra[i], 256 + i);
  n += (size_t)snprintf(j + n, cap - n, "}, \"merges\": [");
  for (size_t i = 0; i < sizeof merges / sizeof *merges; i++)
    n += (size_t)snprintf(j + n, cap - n, "%s\"%s\"", i ? ", " : "", merges[i]);
  n += (size_t)snprintf(
      j + n, cap - n,
      "], \"ignore_merges\": true},"
      " \"added_tokens\": [{\"id\": 300, \"content\": \"<|s|>\", \"special\": true},"
      " {\"id\": 301, \"content\": \"<x>\", \"lstrip\": true, \"rstrip\": true}],"
      " \"normalizer\": {\"type\": \"NFC\"},"
      " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
      "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|"
      "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
      "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
      " \"behavior\": \"Isolated\", \"invert\": false},"
      " {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
      " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
      "{\"SpecialToken\": {\"id\": \"<|s|>\", \"type_id\": 0}},"
      " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]},"
      " \"decoder\": {\"type\": \"ByteLevel\"}}");
  write_file(j, n);
  free(j);
  char err[256];
  if (pr_tokenizer_load(dir, &builtin, err, sizeof err)) {
    fprintf(stderr, "fuzz_tokenizer: the built-in tokenizer does not load: %s\n", err);
    abort();
  }
}

static void run_text(pr_tokenizer_t *t, const char *text, size_t len) {
  static int32_t ids[1 << 16];
  static char out[1 << 20];
  char err[256];
  size_t n, out_len;
  for (unsigned flags = 0; flags < 2; flags++) {
    if (pr_tokenizer_encode(t, text, len, flags, ids, 1 << 16, &n, err, sizeof err)) continue;
    if (pr_tokenizer_decode(t, ids, n, flags, out, sizeof out, &out_len, err, sizeof err)) continue;
    if (!pr__utf8_valid(out, out_len)) abort(); /* decode gives well-formed UTF-8 */
  }
  int32_t raw[64];
  size_t k = len / 4 < 64 ? len / 4 : 64;
  memcpy(raw, text, k * sizeof *raw);
  if (!pr_tokenizer_decode(t, raw, k, 0, out, sizeof out, &out_len, err, sizeof err) &&
      !pr__utf8_valid(out, out_len))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/pr_fuzz_tokenizer_XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    make_builtin();
  }
  if (size < 1) return 0;
  const char *rest = (const char *)data + 1;
  size_t len = size - 1;
  if (!(data[0] & 1)) {
    run_text(builtin, rest, len);
    return 0;
  }
  write_file(rest, len);
  pr_tokenizer_t *t;
  char err[256];
  if (pr_tokenizer_load(dir, &t, err, sizeof err) == PR_OK) {
    run_text(t, "Hello w\xc3\xb6rld 123 <|s|> aaaa \xff\xed\xa0\x80", 27);
    pr_tokenizer_destroy(t);
  }
  return 0;
}
