/* The text layer (src/text/) on hand-made tokenizer.json files: the BPE
 * core (merge order by rank, leftmost first among equal ranks), added
 * tokens with lstrip/rstrip, NFC, bytes that are not UTF-8 and NUL bytes,
 * decoding, the caller's buffers; and the hostile cases: a 10 MB word
 * without a space in bounded time, a regex that backtracks
 * catastrophically, merges naming unknown tokens, deep and huge JSON, ids
 * out of range, components not implemented. The real tokenizers are
 * checked against the reference in tests/text (text_reference). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "packrat/text.h"
#include "text/maps.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

static char dir[64];

/* The byte alphabet's character of b, NUL-terminated. */
static const char *bc(unsigned b) {
  static char s[8][4];
  static int k;
  char *o = s[k++ & 7];
  o[pr_text__utf8_put(pr_text__byte_cp(b), o)] = 0;
  return o;
}

typedef struct {
  const char *const *extra; /* tokens after the 256 bytes (ids 256...) */
  const char *const *merges;
  const char *model_type, *normalizer, *pre_tokenizer, *post_processor, *decoder, *added;
} spec_t;

/* Writes dir/tokenizer.json: a byte-level BPE whose ids 0-255 are the
 * bytes (id = byte value), then spec->extra. */
static void write_tokenizer(const spec_t *spec) {
  json_t *vocab = json_object();
  for (unsigned b = 0; b < 256; b++) json_object_set_new(vocab, bc(b), json_integer(b));
  int id = 256;
  for (const char *const *e = spec->extra; e && *e; e++)
    json_object_set_new(vocab, *e, json_integer(id++));
  json_t *merges = json_array();
  for (const char *const *m = spec->merges; m && *m; m++)
    json_array_append_new(merges, json_string(*m));
  json_t *model = json_pack("{s:s, s:o, s:o}", "type", spec->model_type ? spec->model_type : "BPE",
                            "vocab", vocab, "merges", merges);
  const char *pre = spec->pre_tokenizer ? spec->pre_tokenizer
                                        : "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                          "\"use_regex\": true}";
  json_t *root = json_pack(
      "{s:o, s:o, s:o, s:o, s:o, s:o}", "model", model, "normalizer",
      json_loads(spec->normalizer ? spec->normalizer : "null", JSON_DECODE_ANY, NULL),
      "pre_tokenizer", json_loads(pre, JSON_DECODE_ANY, NULL), "post_processor",
      json_loads(spec->post_processor ? spec->post_processor : "null", JSON_DECODE_ANY, NULL),
      "decoder",
      json_loads(spec->decoder ? spec->decoder : "{\"type\": \"ByteLevel\"}", JSON_DECODE_ANY,
                 NULL),
      "added_tokens", json_loads(spec->added ? spec->added : "[]", JSON_DECODE_ANY, NULL));
  assert_non_null(root);
  char path[128];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  assert_int_equal(json_dump_file(root, path, 0), 0);
  json_decref(root);
}

static pr_tokenizer_t *load_ok(const spec_t *spec) {
  write_tokenizer(spec);
  pr_tokenizer_t *t = NULL;
  char err[256];
  pr_status_t st = pr_tokenizer_load(dir, &t, err, sizeof err);
  if (st) fail_msg("load: %s", err);
  return t;
}

/* Loading spec fails with st and a message holding want. */
static void load_fails(const spec_t *spec, pr_status_t st, const char *want) {
  write_tokenizer(spec);
  pr_tokenizer_t *t = NULL;
  char err[256] = "";
  assert_int_equal(pr_tokenizer_load(dir, &t, err, sizeof err), st);
  assert_null(t);
  if (!strstr(err, want)) fail_msg("the message \"%s\" does not say \"%s\"", err, want);
}

/* Encodes text and checks the ids. */
static void expect_ids(pr_tokenizer_t *t, const char *text, size_t len, unsigned flags,
                       const int32_t *want, size_t n_want) {
  int32_t ids[64];
  size_t n;
  char err[256];
  pr_status_t st = pr_tokenizer_encode(t, text, len, flags, ids, 64, &n, err, sizeof err);
  if (st) fail_msg("encode: %s", err);
  assert_int_equal(n, n_want);
  for (size_t i = 0; i < n; i++)
    if (ids[i] != want[i]) fail_msg("id %zu: %d, want %d", i, ids[i], want[i]);
}
#define EXPECT(t, text, ...)                                                      \
  do {                                                                            \
    const int32_t want_[] = {__VA_ARGS__};                                        \
    expect_ids(t, text, sizeof text - 1, 0, want_, sizeof want_ / sizeof *want_); \
  } while (0)

static const char *const AB_EXTRA[] = {"aa", "aaaa", "bc", "abc", "ab", NULL};
/* ranks: "b c" before "a b": abc -> a + bc -> abc */
static const char *const AB_MERGES[] = {"a a", "aa aa", "b c", "a bc", "a b", NULL};
enum { AA = 256, AAAA, BC, ABC, AB };

static void test_merge_order(void **state) {
  pr_tokenizer_t *t = load_ok(&(spec_t){.extra = AB_EXTRA, .merges = AB_MERGES});
  EXPECT(t, "aaaa", AAAA);
  EXPECT(t, "aaa", AA, 'a'); /* equal ranks: the leftmost pair first */
  EXPECT(t, "aaaaa", AAAA, 'a');
  EXPECT(t, "abc", ABC); /* b c (rank 2) before a b (rank 4) */
  EXPECT(t, "ab", AB);
  EXPECT(t, "abab", AB, AB);
  EXPECT(t, "ab c", AB, ' ', 'c'); /* " c" is a piece: no merge across pieces */
  pr_tokenizer_destroy(t);
}

static void test_pieces_and_bytes(void **state) {
  pr_tokenizer_t *t = load_ok(&(spec_t){.extra = AB_EXTRA, .merges = AB_MERGES});
  /* GPT-2's regex: " ab" is one piece, its space the byte alphabet's Ġ (id
   * 32: the bytes are their own ids here), which does not merge */
  EXPECT(t, "ab ab", AB, ' ', AB);
  /* NUL is a character: byte 0 */
  EXPECT(t, "a\0a", 'a', 0, 'a');
  /* not UTF-8: each ill-formed sequence is U+FFFD (EF BF BD) */
  EXPECT(t, "a\xff", 'a', 0xEF, 0xBF, 0xBD);
  EXPECT(t, "\xed\xa0\x80", 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD);
  EXPECT(t, "\xe2\x82", 0xEF, 0xBF, 0xBD); /* a cut character: one */
  EXPECT(t, "\xc3\xa9", 0xC3, 0xA9);       /* é as it is */
  pr_tokenizer_destroy(t);
}

static void test_decode(void **state) {
  pr_tokenizer_t *t =
      load_ok(&(spec_t){.extra = AB_EXTRA,
                        .merges = AB_MERGES,
                        .added = "[{\"id\": 261, \"content\": \"<s>\", \"special\": true}]"});
  char out[64];
  size_t len;
  char err[256];
  int32_t ids[] = {AB, ' ', AAAA, 261, 0xC3};
  assert_int_equal(pr_tokenizer_decode(t, ids, 5, 0, out, sizeof out, &len, err, sizeof err), 0);
  /* a cut character decodes to U+FFFD */
  assert_int_equal(len, strlen("ab aaaa<s>\xef\xbf\xbd"));
  assert_string_equal(out, "ab aaaa<s>\xef\xbf\xbd");
  assert_int_equal(pr_tokenizer_decode(t, ids, 5, PR_TOKENIZER_SKIP_SPECIAL, out, sizeof out, &len,
                                       err, sizeof err),
                   0);
  /* without <s> between them, AAAA and 0xC3 are one run of bytes */
  assert_string_equal(out, "ab aaaa\xef\xbf\xbd");
  /* ids it does not know decode to nothing */
  int32_t unknown[] = {-5, 'a', 1 << 20};
  assert_int_equal(pr_tokenizer_decode(t, unknown, 3, 0, out, sizeof out, &len, err, sizeof err),
                   0);
  assert_string_equal(out, "a");
  /* the caller's buffer: too small says how much is needed */
  assert_int_equal(pr_tokenizer_decode(t, ids, 5, 0, out, 4, &len, err, sizeof err),
                   PR_ERR_TOO_LARGE);
  assert_int_equal(len, strlen("ab aaaa<s>\xef\xbf\xbd"));
  int32_t few[2];
  size_t n;
  assert_int_equal(pr_tokenizer_encode(t, "ab ab ab", 8, 0, few, 2, &n, err, sizeof err),
                   PR_ERR_TOO_LARGE);
  assert_int_equal(n, 5);
  assert_int_equal(few[0], AB);
  pr_tokenizer_destroy(t);
}

static void test_added_tokens(void **state) {
  pr_tokenizer_t *t = load_ok(&(spec_t){
      .extra = AB_EXTRA,
      .merges = AB_MERGES,
      .added = "[{\"id\": 261, \"content\": \"<x>\", \"lstrip\": true, \"rstrip\": true},"
               " {\"id\": 262, \"content\": \"<xy>\"}, {\"id\": 263, \"content\": \"<\"}]",
      .post_processor = "{\"type\": \"TemplateProcessing\", \"single\": ["
                        "{\"SpecialToken\": {\"id\": \"<xy>\", \"type_id\": 0}},"
                        "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}"});
  /* lstrip/rstrip take the white space around <x> (JavaScript's: \u3000 too) */
  EXPECT(t, "ab \t<x>\xe3\x80\x80 ab", AB, 261, AB);
  /* the longest added token wins; a lone "<" is one too */
  EXPECT(t, "<xy><x<", 262, 263, 'x', 263);
  int32_t want[] = {262, AB};
  expect_ids(t, "ab", 2, PR_TOKENIZER_ADD_SPECIAL, want, 2);
  pr_tokenizer_destroy(t);
}

static void test_nfc(void **state) {
  pr_tokenizer_t *t = load_ok(
      &(spec_t){.extra = AB_EXTRA, .merges = AB_MERGES, .normalizer = "{\"type\": \"NFC\"}"});
  EXPECT(t, "e\xcc\x81", 0xC3, 0xA9); /* e + U+0301 is é */
  pr_tokenizer_destroy(t);
}

static void test_split_isolated(void **state) {
  pr_tokenizer_t *t = load_ok(
      &(spec_t){.extra = AB_EXTRA,
                .merges = AB_MERGES,
                .pre_tokenizer = "{\"type\": \"Sequence\", \"pretokenizers\": ["
                                 "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p{N}\"},"
                                 " \"behavior\": \"Isolated\", \"invert\": false},"
                                 "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                                 "\"use_regex\": false}]}"});
  /* digits are pieces of their own, so "a1a" does not merge to "aa" */
  EXPECT(t, "aa1aa", AA, '1', AA);
  pr_tokenizer_destroy(t);
  /* Removed and inverted: the matches alone are pieces, the rest is gone */
  t = load_ok(&(spec_t){.extra = AB_EXTRA,
                        .merges = AB_MERGES,
                        .pre_tokenizer = "{\"type\": \"Sequence\", \"pretokenizers\": ["
                                         "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a+\"},"
                                         " \"behavior\": \"Removed\", \"invert\": true},"
                                         "{\"type\": \"ByteLevel\", \"use_regex\": false}]}"});
  EXPECT(t, "baab a", AA, 'a');
  pr_tokenizer_destroy(t);
}

/* \s means JavaScript's white space: U+FEFF (EF BB BF) is, so "a" and it
 * are pieces apart and the merge of "a" with the byte EF (\u00ef) cannot
 * happen; PCRE2's own \s would have made one piece of them. */
static void test_js_space(void **state) {
  static const char *const extra[] = {"a\xc3\xaf", NULL}, *const merges[] = {"a \xc3\xaf", NULL};
  pr_tokenizer_t *t = load_ok(
      &(spec_t){.extra = extra,
                .merges = merges,
                .pre_tokenizer = "{\"type\": \"Sequence\", \"pretokenizers\": ["
                                 "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"},"
                                 " \"behavior\": \"Isolated\", \"invert\": false},"
                                 "{\"type\": \"ByteLevel\", \"use_regex\": false}]}"});
  EXPECT(t, "a\xef\xbb\xbf", 'a', 0xEF, 0xBB, 0xBF);
  EXPECT(t, "a\xef\xbf\xbd", 256, 0xBF, 0xBD); /* U+FFFD is not white space */
  pr_tokenizer_destroy(t);
}

/* A word of 10 MB without a space merges in bounded time (O(n log n)). */
static void test_long_word(void **state) {
  pr_tokenizer_t *t = load_ok(&(spec_t){.extra = AB_EXTRA, .merges = AB_MERGES});
  size_t len = 10u << 20;
  char *text = malloc(len);
  assert_non_null(text);
  memset(text, 'a', len);
  size_t cap = len / 4 + 16, n;
  int32_t *ids = malloc(cap * sizeof *ids);
  char err[256];
  double t0 = pr__now();
  pr_status_t st = pr_tokenizer_encode(t, text, len, 0, ids, cap, &n, err, sizeof err);
  double took = pr__now() - t0;
  if (st) fail_msg("encode: %s", err);
  assert_int_equal(n, len / 4);
  assert_int_equal(ids[0], AAAA);
  assert_int_equal(ids[n - 1], AAAA);
  print_message("10 MB word: %.2f s\n", took);
  assert_true(took < 60); /* seconds even under ASan; a quadratic loop takes days */
  free(ids);
  free(text);
  pr_tokenizer_destroy(t);
}

/* A regex that backtracks catastrophically stops at the match limit. */
static void test_regex_limit(void **state) {
  pr_tokenizer_t *t = load_ok(
      &(spec_t){.extra = AB_EXTRA,
                .merges = AB_MERGES,
                .pre_tokenizer = "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a+)+$\"},"
                                 " \"behavior\": \"Isolated\", \"invert\": false}"});
  char text[64];
  memset(text, 'a', 48);
  text[48] = '!';
  int32_t ids[64];
  size_t n;
  char err[256];
  double t0 = pr__now();
  assert_int_equal(pr_tokenizer_encode(t, text, 49, 0, ids, 64, &n, err, sizeof err),
                   PR_ERR_TOO_LARGE);
  assert_true(pr__now() - t0 < 30);
  assert_non_null(strstr(err, "match limit"));
  pr_tokenizer_destroy(t);
}

static void test_refused(void **state) {
  static const char *const bad_merge[] = {"a a", "q zz", NULL};
  load_fails(&(spec_t){.extra = AB_EXTRA, .merges = bad_merge}, PR_ERR_INVALID,
             "model.merges[1] names \"zz\", which is not in the vocabulary");
  static const char *const unmerged[] = {"b b", NULL}; /* "bb" is not a token */
  load_fails(&(spec_t){.extra = AB_EXTRA, .merges = unmerged}, PR_ERR_INVALID, "\"bb\"");
  static const char *const three[] = {"a b c", NULL};
  load_fails(&(spec_t){.extra = AB_EXTRA, .merges = three}, PR_ERR_INVALID, "not two tokens");
  load_fails(&(spec_t){.model_type = "WordPiece"}, PR_ERR_UNSUPPORTED, "\"WordPiece\"");
  load_fails(&(spec_t){.model_type = "Unigram"}, PR_ERR_UNSUPPORTED, "\"Unigram\"");
  load_fails(&(spec_t){.normalizer = "{\"type\": \"Lowercase\"}"}, PR_ERR_UNSUPPORTED,
             "normalizer \"Lowercase\"");
  load_fails(&(spec_t){.pre_tokenizer = "{\"type\": \"Metaspace\"}"}, PR_ERR_UNSUPPORTED,
             "pre_tokenizer \"Metaspace\"");
  load_fails(&(spec_t){.pre_tokenizer = "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"},"
                                        " \"behavior\": \"MergedWithNext\"}"},
             PR_ERR_UNSUPPORTED, "MergedWithNext");
  load_fails(&(spec_t){.pre_tokenizer = "{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                                        "\"(?i)abc\"}, \"behavior\": \"Isolated\"}"},
             PR_ERR_UNSUPPORTED, "(?i");
  load_fails(&(spec_t){.pre_tokenizer = "{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                                        "\"\\\\h+\"}, \"behavior\": \"Isolated\"}"},
             PR_ERR_UNSUPPORTED, "\\h");
  load_fails(&(spec_t){.decoder = "{\"type\": \"Metaspace\"}"}, PR_ERR_UNSUPPORTED,
             "decoder \"Metaspace\"");
  load_fails(&(spec_t){.post_processor = "{\"type\": \"BertProcessing\"}"}, PR_ERR_UNSUPPORTED,
             "BertProcessing");
  load_fails(&(spec_t){.added = "[{\"id\": 99999999, \"content\": \"<big>\"}]"}, PR_ERR_INVALID,
             "added_tokens[0]");
  static char long_added[1200];
  int n = snprintf(long_added, sizeof long_added, "[{\"id\": 300, \"content\": \"");
  memset(long_added + n, 'x', 1100);
  snprintf(long_added + n + 1100, sizeof long_added - n - 1100, "\"}]");
  load_fails(&(spec_t){.added = long_added}, PR_ERR_TOO_LARGE, "longer than 1024 bytes");
}

/* A vocabulary whose keys all hash to one slot (a crafted file) is refused
 * instead of loading in quadratic time. */
static void test_collisions(void **state) {
  enum { N = 600 };
  static char keys[N][16];
  static const char *extra[N + 1];
  uint64_t x = 46;
  for (int k = 0; k < N;) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    snprintf(keys[k], sizeof keys[k], "k%016llx", (unsigned long long)x);
    /* the table of ~920 expected keys has 2048 slots: collide in 11 bits */
    if ((pr_text__hash(keys[k], strlen(keys[k])) & 2047) == 0) extra[k] = keys[k], k++;
  }
  extra[N] = NULL;
  load_fails(&(spec_t){.extra = extra}, PR_ERR_TOO_LARGE, "collide");
}

static void write_file(const char *name, const char *text, size_t len) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  fclose(f);
}

static void test_hostile_files(void **state) {
  pr_tokenizer_t *t = NULL;
  char err[256];
  /* deep JSON */
  size_t depth = 100000;
  char *deep = malloc(2 * depth);
  memset(deep, '[', depth);
  memset(deep + depth, ']', depth);
  write_file("tokenizer.json", deep, 2 * depth);
  free(deep);
  assert_int_equal(pr_tokenizer_load(dir, &t, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "depth"));
  /* a file over the size limit (sparse: nothing is written) */
  char path[128];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  assert_int_equal(truncate(path, (off_t)PR_TOKENIZER_MAX_FILE + 1), 0);
  assert_int_equal(pr_tokenizer_load(dir, &t, err, sizeof err), PR_ERR_TOO_LARGE);
  /* an id far out of range: refused before any table is sized by it */
  const char *huge =
      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 2000000000}, "
      "\"merges\": []}}";
  write_file("tokenizer.json", huge, strlen(huge));
  assert_int_equal(pr_tokenizer_load(dir, &t, err, sizeof err), PR_ERR_TOO_LARGE);
  /* two tokens with one id */
  const char *twice =
      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1, \"b\": 1}, "
      "\"merges\": []}}";
  write_file("tokenizer.json", twice, strlen(twice));
  assert_int_equal(pr_tokenizer_load(dir, &t, err, sizeof err), PR_ERR_INVALID);
  assert_non_null(strstr(err, "two tokens"));
  /* no file at all */
  unlink(path);
  assert_int_equal(pr_tokenizer_load(dir, &t, err, sizeof err), PR_ERR_NOT_FOUND);
  assert_null(t);
  pr_tokenizer_destroy(NULL);
}

/* WHATWG's decoder, which the reference's input goes through. */
static void test_sanitize(void **state) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"abc", "abc"},
      {"\x80", "\xef\xbf\xbd"},
      {"\xc3", "\xef\xbf\xbd"},
      {"\xc3(", "\xef\xbf\xbd("},
      {"\xe2\x82\xac", "\xe2\x82\xac"},
      {"\xe2\x82", "\xef\xbf\xbd"},
      {"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong: E0 needs A0+ */
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
      {"\xf0\x9f\x98", "\xef\xbf\xbd"},
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char out[64];
    size_t n = pr_text__utf8_sanitize(cases[k].in, strlen(cases[k].in), out);
    out[n] = 0;
    assert_string_equal(out, cases[k].out);
  }
}

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/pr_test_text_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sanitize),         cmocka_unit_test(test_merge_order),
      cmocka_unit_test(test_pieces_and_bytes), cmocka_unit_test(test_decode),
      cmocka_unit_test(test_added_tokens),     cmocka_unit_test(test_nfc),
      cmocka_unit_test(test_split_isolated),   cmocka_unit_test(test_js_space),
      cmocka_unit_test(test_long_word),        cmocka_unit_test(test_regex_limit),
      cmocka_unit_test(test_refused),          cmocka_unit_test(test_hostile_files),
      cmocka_unit_test(test_collisions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
