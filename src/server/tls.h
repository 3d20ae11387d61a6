/* TLS for the HTTP front end: libmicrohttpd over GnuTLS, from a PEM
 * certificate (chain) and key; optionally mutual TLS, where every request
 * must come over a connection whose client certificate a given CA signed.
 *
 * Notes on the design:
 * - The PEM files are read once at start (at most 1 MiB each) and kept
 *   until the server stops; a file that cannot be read, or a key without a
 *   certificate, is an error at start. libmicrohttpd checks that key and
 *   certificate match when it starts.
 * - With a client CA, the handshake asks for a client certificate and the
 *   request is refused (403) from its headers, before any body byte, when
 *   none came or GnuTLS cannot verify it against the CA.
 * - Read-only after pr__tls_load: any thread may call pr__tls_client_ok. */
#ifndef PR_SERVER_TLS_H
#define PR_SERVER_TLS_H

#include <microhttpd.h>
#include <stdbool.h>

#include "packrat/engine.h"

typedef struct pr_tls pr_tls_t;

/* *out is NULL (plain HTTP) when cert, key and client_ca are all NULL. */
pr_status_t pr__tls_load(const char *cert, const char *key, const char *client_ca, pr_tls_t **out,
                         char *err, size_t err_len);
void pr__tls_free(pr_tls_t *t);

/* The PEM texts (NUL-terminated; client_ca NULL without mutual TLS), for
 * the gRPC front end; valid until pr__tls_free. */
void pr__tls_pem(const pr_tls_t *t, const char **cert, const char **key, const char **client_ca);

/* The daemon flags TLS adds (0 for NULL). */
unsigned pr__tls_flags(const pr_tls_t *t);
/* Writes TLS's daemon options into items (room for 4); returns how many. */
int pr__tls_options(const pr_tls_t *t, struct MHD_OptionItem *items);
/* Whether a request on connection c may go on: true without mutual TLS,
 * else whether c's client certificate verifies against the CA. */
bool pr__tls_client_ok(const pr_tls_t *t, struct MHD_Connection *c);

#endif
