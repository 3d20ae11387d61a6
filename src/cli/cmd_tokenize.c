/* packrat tokenize: text to token ids and back with a model's Hugging Face
 * tokenizer (packrat/text.h), one JSON value per line on stdin and one per
 * line on stdout: the tokenizer as a filter, for scripts and for the
 * reference tests (tests/text).
 *
 * Notes on the design:
 * - A JSON string cannot hold bytes that are not UTF-8, so a line may also
 *   be an array of byte values: the text exactly as bytes, for text that is
 *   not valid UTF-8.
 * - A line that is not understood stops the command (exit 1, its line
 *   number on stderr): a filter that skipped lines would misalign its
 *   output with its input. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "packrat/text.h"

#define MAX_LINE ((size_t)PR_TOKENIZER_MAX_TEXT * 8) /* a JSON line's bytes */

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat tokenize --tokenizer DIR [--special] [--decode [--skip-special]]\n"
          "\n"
          "Encodes text to token ids (or decodes ids to text) with the Hugging Face\n"
          "tokenizer in DIR (tokenizer.json, and tokenizer_config.json where there is one),\n"
          "exactly as Hugging Face's tokenizers (transformers.js) do. Reads one JSON value\n"
          "per line on stdin and writes one per line on stdout:\n"
          "\n"
          "  encode (default)  a JSON string (or, for text that is not valid UTF-8, a JSON\n"
          "                    array of its byte values 0-255) -> a JSON array of ids\n"
          "  --decode          a JSON array of ids -> the text as a JSON string\n"
          "\n"
          "  --tokenizer DIR   the folder with tokenizer.json\n"
          "  --special         add the post-processor's special tokens (e.g. a BOS)\n"
          "  --skip-special    with --decode: leave special tokens out of the text\n"
          "\n"
          "Which tokenizers work (byte-level BPE: GPT-2, Llama 3, Qwen) and what is refused:\n"
          "docs/text.md. Exit status: 0 every line done; 1 the tokenizer did not load or a\n"
          "line was not understood (its number on stderr); 2 bad usage.\n");
}

/* The bytes of an encode line: a string, or an array of byte values. */
static int line_text(json_t *v, char **text, size_t *len, char **owned) {
  *owned = NULL;
  if (json_is_string(v)) {
    *text = (char *)json_string_value(v);
    *len = json_string_length(v);
    return 0;
  }
  if (!json_is_array(v)) return -1;
  size_t n = json_array_size(v), i;
  *owned = malloc(n ? n : 1);
  if (!*owned) return -1;
  json_t *b;
  json_array_foreach(v, i, b) {
    json_int_t x = json_integer_value(b);
    if (!json_is_integer(b) || x < 0 || x > 255) {
      free(*owned);
      *owned = NULL;
      return -1;
    }
    (*owned)[i] = (char)x;
  }
  *text = *owned;
  *len = n;
  return 0;
}

static int encode_line(pr_tokenizer_t *tok, json_t *v, unsigned flags, int32_t **ids, size_t *cap,
                       size_t lineno) {
  char *text, *owned, err[256];
  size_t len, n;
  if (line_text(v, &text, &len, &owned)) {
    fprintf(stderr, "packrat tokenize: line %zu: not a JSON string or an array of bytes\n", lineno);
    return -1;
  }
  pr_status_t st = pr_tokenizer_encode(tok, text, len, flags, *ids, *cap, &n, err, sizeof err);
  if (st == PR_ERR_TOO_LARGE && n > *cap) {
    int32_t *grown = realloc(*ids, n * sizeof **ids);
    if (grown) {
      *ids = grown;
      *cap = n;
      st = pr_tokenizer_encode(tok, text, len, flags, *ids, *cap, &n, err, sizeof err);
    }
  }
  free(owned);
  if (st) {
    fprintf(stderr, "packrat tokenize: line %zu: %s\n", lineno, err);
    return -1;
  }
  putchar('[');
  for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", (*ids)[i]);
  fputs("]\n", stdout);
  return 0;
}

static int decode_line(pr_tokenizer_t *tok, json_t *v, unsigned flags, size_t lineno) {
  size_t n = json_array_size(v), i, len;
  int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
  char err[256];
  if (!ids || !json_is_array(v)) {
    free(ids);
    fprintf(stderr, "packrat tokenize: line %zu: not a JSON array of ids\n", lineno);
    return -1;
  }
  json_t *x;
  json_array_foreach(v, i, x) {
    json_int_t id = json_integer_value(x);
    if (!json_is_integer(x) || id < INT32_MIN || id > INT32_MAX) {
      free(ids);
      fprintf(stderr, "packrat tokenize: line %zu: id %zu is not a 32-bit integer\n", lineno, i);
      return -1;
    }
    ids[i] = (int32_t)id;
  }
  char small[4096], *text = small;
  pr_status_t st =
      pr_tokenizer_decode(tok, ids, n, flags, text, sizeof small, &len, err, sizeof err);
  if (st == PR_ERR_TOO_LARGE && len >= sizeof small && (text = malloc(len + 1)))
    st = pr_tokenizer_decode(tok, ids, n, flags, text, len + 1, &len, err, sizeof err);
  free(ids);
  if (!text) {
    fprintf(stderr, "packrat tokenize: line %zu: out of memory\n", lineno);
    return -1;
  }
  if (st) {
    fprintf(stderr, "packrat tokenize: line %zu: %s\n", lineno, err);
    if (text != small) free(text);
    return -1;
  }
  json_t *s = json_stringn(text, len);
  char *out = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
  if (text != small) free(text);
  json_decref(s);
  if (!out) {
    fprintf(stderr, "packrat tokenize: line %zu: the text could not be written as JSON\n", lineno);
    return -1;
  }
  puts(out);
  free(out);
  return 0;
}

int pr__cli_tokenize(int argc, char **argv) {
  const char *dir = NULL;
  bool decode = false, special = false, skip_special = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!strcmp(argv[i], "--decode")) {
      decode = true;
    } else if (!strcmp(argv[i], "--special")) {
      special = true;
    } else if (!strcmp(argv[i], "--skip-special")) {
      skip_special = true;
    } else {
      fprintf(stderr, "packrat tokenize: unknown or incomplete option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (!dir || (special && decode) || (skip_special && !decode)) {
    fprintf(stderr, "packrat tokenize: %s\n",
            !dir      ? "--tokenizer DIR is required"
            : special ? "--special is for encoding; --skip-special for --decode"
                      : "--skip-special goes with --decode");
    usage(stderr);
    return 2;
  }
  pr_tokenizer_t *tok;
  char err[512];
  if (pr_tokenizer_load(dir, &tok, err, sizeof err)) {
    fprintf(stderr, "packrat tokenize: %s: %s\n", dir, err);
    return 1;
  }
  char *line = NULL;
  size_t line_cap = 0, lineno = 0, cap = 0;
  int32_t *ids = NULL;
  ssize_t got;
  int rc = 0;
  while ((got = getline(&line, &line_cap, stdin)) >= 0) {
    lineno++;
    if ((size_t)got > MAX_LINE) {
      fprintf(stderr, "packrat tokenize: line %zu: longer than %zu bytes\n", lineno, MAX_LINE);
      rc = 1;
      break;
    }
    json_error_t je;
    json_t *v = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) {
      fprintf(stderr, "packrat tokenize: line %zu: not JSON: %s\n", lineno, je.text);
      rc = 1;
      break;
    }
    int bad = decode
                  ? decode_line(tok, v, skip_special ? PR_TOKENIZER_SKIP_SPECIAL : 0, lineno)
                  : encode_line(tok, v, special ? PR_TOKENIZER_ADD_SPECIAL : 0, &ids, &cap, lineno);
    json_decref(v);
    if (bad) {
      rc = 1;
      break;
    }
  }
  free(line);
  free(ids);
  pr_tokenizer_destroy(tok);
  if (fflush(stdout) || ferror(stdout)) {
    fprintf(stderr, "packrat tokenize: writing the output failed\n");
    rc = 1;
  }
  return rc;
}
