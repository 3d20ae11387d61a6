/* packrat text: Hugging Face tokenizers in C.
 *
 * Loads a folder's tokenizer.json (with its tokenizer_config.json where it
 * has one) and turns text into token ids and ids back into text exactly as
 * the reference (Hugging Face's tokenizers as transformers.js reproduces
 * them) does:
 *
 *   pr_tokenizer_t *tok;  char err[512];
 *   if (pr_tokenizer_load("models/llama3", &tok, err, sizeof err)) die(err);
 *   int32_t ids[256];  size_t n;
 *   if (pr_tokenizer_encode(tok, text, strlen(text), PR_TOKENIZER_ADD_SPECIAL,
 *                           ids, 256, &n, err, sizeof err)) die(err);
 *   char out[1024];  size_t len;
 *   pr_tokenizer_decode(tok, ids, n, 0, out, sizeof out, &len, err, sizeof err);
 *   pr_tokenizer_destroy(tok);
 *
 * What works today (docs/text.md): the byte-level BPE family (GPT-2,
 * Llama 3, Qwen); anything else in a tokenizer.json is refused at load with
 * an error naming the component, never encoded wrongly.
 *
 * Ownership and threads: the caller owns every buffer; encode and decode
 * write into the caller's arrays and say how much they needed (as snprintf
 * does). A tokenizer keeps a cache of words it has encoded, so one tokenizer
 * is used by one thread at a time (load one per thread, or lock around it).
 */
#ifndef PACKRAT_TEXT_H
#define PACKRAT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "packrat/engine.h" /* pr_status_t and its codes */

#pragma GCC visibility push(default) /* the public API: exported */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pr_tokenizer pr_tokenizer_t;

/* Encode flags. */
enum {
  /* add the post-processor's special tokens (a template's BOS/EOS);
   * the reference's add_special_tokens */
  PR_TOKENIZER_ADD_SPECIAL = 1u << 0,
};
/* Decode flags. */
enum {
  /* leave out special tokens (the reference's skip_special_tokens) */
  PR_TOKENIZER_SKIP_SPECIAL = 1u << 0,
};

/* Limits on what a tokenizer folder and a text may hold; over them is
 * PR_ERR_TOO_LARGE. */
#define PR_TOKENIZER_MAX_FILE (256u << 20)  /* bytes of tokenizer.json */
#define PR_TOKENIZER_MAX_ID ((1 << 22) - 1) /* the largest token id */
#define PR_TOKENIZER_MAX_TEXT (256u << 20)  /* bytes of one text to encode */

/* Loads DIR/tokenizer.json and, where present, DIR/tokenizer_config.json.
 * On success *out is a tokenizer the caller destroys. Errors (a message in
 * err): PR_ERR_IO or PR_ERR_NOT_FOUND (a file), PR_ERR_INVALID (malformed
 * JSON or a malformed component, e.g. a merge naming a token that is not in
 * the vocabulary), PR_ERR_UNSUPPORTED (a component this version does not
 * implement: the message names it), PR_ERR_TOO_LARGE (over the limits
 * above), PR_ERR_NOMEM. */
pr_status_t pr_tokenizer_load(const char *dir, pr_tokenizer_t **out, char *err, size_t err_len);

/* Frees the tokenizer; NULL is a no-op. */
void pr_tokenizer_destroy(pr_tokenizer_t *tok);

/* Encodes text[0..len) (bytes: text that is not valid UTF-8 is read as the
 * reference reads bytes, each ill-formed sequence becoming U+FFFD as
 * WHATWG's UTF-8 decoder does; NUL bytes are characters). Writes up to cap
 * ids to ids and the number the whole text needs to *n_ids: when that is
 * more than cap, returns PR_ERR_TOO_LARGE having written the first cap (call
 * again with a larger array). flags: PR_TOKENIZER_ADD_SPECIAL. Other
 * errors: PR_ERR_TOO_LARGE (len over PR_TOKENIZER_MAX_TEXT, or the
 * pre-tokenizer's regex ran past its match limit), PR_ERR_NOMEM. */
pr_status_t pr_tokenizer_encode(pr_tokenizer_t *tok, const char *text, size_t len, unsigned flags,
                                int32_t *ids, size_t cap, size_t *n_ids, char *err, size_t err_len);

/* Decodes ids[0..n) to UTF-8 text as the reference does (ill-formed byte
 * sequences, e.g. a character cut between tokens, become U+FFFD; an id the
 * tokenizer does not know decodes to nothing, or to the unknown token where
 * the model has one). Writes up to cap bytes to out, then a NUL where
 * there is room, and the length of the whole text (without the NUL) to
 * *len: when that is cap or more, returns PR_ERR_TOO_LARGE with out holding
 * the first cap bytes. flags: PR_TOKENIZER_SKIP_SPECIAL. */
pr_status_t pr_tokenizer_decode(pr_tokenizer_t *tok, const int32_t *ids, size_t n, unsigned flags,
                                char *out, size_t cap, size_t *len, char *err, size_t err_len);

/* The number of ids in the vocabulary (the largest id + 1). */
size_t pr_tokenizer_vocab_size(const pr_tokenizer_t *tok);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif
