/* TLS for the HTTP front end (see tls.h). */
#include "server/tls.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"

#define PEM_MAX ((long)1 << 20)

struct pr_tls {
  char *cert, *key, *client_ca; /* PEM text, NUL-terminated */
};

static pr_status_t read_pem(const char *what, const char *path, char **out, char *err,
                            size_t err_len) {
  *out = NULL;
  if (!path) return PR_OK;
  FILE *f = pr__fopen_regular(path);
  if (!f) {
    pr__errf(err, err_len, "cannot read the TLS %s file %s: %s", what, path, pr__file_error(errno));
    return PR_ERR_IO;
  }
  char *buf = malloc(PEM_MAX + 1);
  size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
  fclose(f);
  if (!buf) return PR_ERR_NOMEM;
  if (n == 0 || n > PEM_MAX || !strstr(buf, "-----BEGIN ")) {
    free(buf);
    pr__errf(err, err_len, "the TLS %s file %s is not PEM (or is over 1 MiB)", what, path);
    return PR_ERR_INVALID;
  }
  buf[n] = 0;
  *out = buf;
  return PR_OK;
}

pr_status_t pr__tls_load(const char *cert, const char *key, const char *client_ca, pr_tls_t **out,
                         char *err, size_t err_len) {
  *out = NULL;
  if (!cert && !key && !client_ca) return PR_OK;
  if (!cert || !key) {
    pr__errf(err, err_len, "TLS needs both --tls-cert and --tls-key");
    return PR_ERR_INVALID;
  }
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    pr__errf(err, err_len, "this libmicrohttpd has no TLS support");
    return PR_ERR_UNSUPPORTED;
  }
  pr_tls_t *t = calloc(1, sizeof *t);
  if (!t) return PR_ERR_NOMEM;
  pr_status_t st = read_pem("certificate", cert, &t->cert, err, err_len);
  if (!st) st = read_pem("key", key, &t->key, err, err_len);
  if (!st) st = read_pem("client CA", client_ca, &t->client_ca, err, err_len);
  if (st) {
    pr__tls_free(t);
    return st;
  }
  *out = t;
  return PR_OK;
}

void pr__tls_free(pr_tls_t *t) {
  if (!t) return;
  if (t->key) memset(t->key, 0, strlen(t->key));
  free(t->cert);
  free(t->key);
  free(t->client_ca);
  free(t);
}

void pr__tls_pem(const pr_tls_t *t, const char **cert, const char **key, const char **client_ca) {
  *cert = t ? t->cert : NULL;
  *key = t ? t->key : NULL;
  *client_ca = t ? t->client_ca : NULL;
}

unsigned pr__tls_flags(const pr_tls_t *t) {
  return t ? MHD_USE_TLS : 0;
}

int pr__tls_options(const pr_tls_t *t, struct MHD_OptionItem *items) {
  if (!t) return 0;
  int n = 0;
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t->cert};
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t->key};
  if (t->client_ca)
    items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, t->client_ca};
  return n;
}

bool pr__tls_client_ok(const pr_tls_t *t, struct MHD_Connection *c) {
  if (!t || !t->client_ca) return true;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (!ci || !ci->tls_session) return false;
  gnutls_session_t session = (gnutls_session_t)ci->tls_session;
  unsigned status = 0;
  unsigned n_certs = 0;
  if (!gnutls_certificate_get_peers(session, &n_certs) || n_certs == 0) return false;
  return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS && status == 0;
}
