#include "server/repository.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"

static bool valid_name(const char *s) {
  if (!*s || strlen(s) >= PR_NAME_MAX || s[0] == '.') return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-' || *s == '.'))
      return false;
  return true;
}

static bool is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int pr_repo_scan(const char *dir, pr_repo_entry_t *out, int max) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    size_t len = strlen(e->d_name);
    if (len > 5 && !strcmp(e->d_name + len - 5, ".onnx") && is_file(p)) {
      pr_repo_entry_t *r = &out[n];
      memset(r, 0, sizeof *r);
      snprintf(r->name, sizeof r->name, "%.*s", (int)(len - 5), e->d_name);
      if (!valid_name(r->name)) continue;
      snprintf(r->version, sizeof r->version, "1");
      snprintf(r->path, sizeof r->path, "%s", p);
      n++;
      continue;
    }
    if (!valid_name(e->d_name)) continue;
    DIR *md = opendir(p);
    if (!md) continue;
    long best = -1;
    struct dirent *v;
    while ((v = readdir(md))) {
      char *end;
      long ver = strtol(v->d_name, &end, 10);
      char mp[4096];
      snprintf(mp, sizeof mp, "%s/%s/model.onnx", p, v->d_name);
      if (*end || end == v->d_name || ver < 0 || !is_file(mp)) continue;
      if (ver > best) best = ver;
    }
    closedir(md);
    if (best < 0) continue;
    pr_repo_entry_t *r = &out[n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", e->d_name);
    snprintf(r->version, sizeof r->version, "%ld", best);
    snprintf(r->path, sizeof r->path, "%s/%ld/model.onnx", p, best);
    char cp[4096];
    snprintf(cp, sizeof cp, "%s/config.json", p);
    if (is_file(cp)) snprintf(r->config, sizeof r->config, "%s", cp);
  }
  closedir(d);
  return n;
}

/* Error messages quote outside text (keys, paths) and may be cut to the
 * caller's buffer; the server sends them as JSON, which must be UTF-8. So a
 * message never ends inside a UTF-8 sequence, and bytes that are not UTF-8
 * (overlong forms and surrogates included, as jansson checks) become '?'. */
static void utf8_clean(char *s) {
  unsigned char *p = (unsigned char *)s;
  while (*p) {
    int n = *p < 0x80 ? 1 : *p < 0xc2 ? 0 : *p < 0xe0 ? 2 : *p < 0xf0 ? 3 : *p < 0xf5 ? 4 : 0;
    uint32_t v = n == 2 ? *p & 0x1f : n == 3 ? *p & 0x0f : *p & 0x07;
    int i = 1;
    for (; i < n && (p[i] & 0xc0) == 0x80; i++) v = v << 6 | (p[i] & 0x3f);
    if (i < n && !p[i]) { /* cut inside a sequence: end before it */
      *p = '\0';
      return;
    }
    if (n == 0 || i < n || (n == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
        (n == 4 && (v < 0x10000 || v > 0x10ffff))) {
      *p++ = '?';
      continue;
    }
    p += n;
  }
}

static void set_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(char *err, size_t err_len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_len, fmt, ap);
  va_end(ap);
  if (err_len) utf8_clean(err);
}

int pr_repo_parse_config(const char *text, size_t len, const char *origin, pr_model_config_t *c,
                         char *err, size_t err_len) {
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    set_error(err, err_len, "%s: %s (line %d)", origin, je.text, je.line);
    return -1;
  }
  int rc = -1;
  if (!json_is_object(root)) {
    set_error(err, err_len, "%s: must be a JSON object", origin);
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (!strcmp(key, "max_batch_size") || !strcmp(key, "max_queue_delay_us") ||
        !strcmp(key, "queue_capacity") || !strcmp(key, "request_timeout_ms")) {
      if (!json_is_integer(v) ||
          json_integer_value(v) < (strcmp(key, "max_queue_delay_us") ? 1 : 0) ||
          json_integer_value(v) > 100000000) {
        set_error(err, err_len, "%s: '%s' must be a positive integer", origin, key);
        goto out;
      }
      long long x = json_integer_value(v);
      if (!strcmp(key, "max_batch_size")) {
        if (x > 4096) {
          set_error(err, err_len, "%s: max_batch_size at most 4096", origin);
          goto out;
        }
        c->max_batch = (int)x;
      } else if (!strcmp(key, "max_queue_delay_us")) {
        c->max_queue_delay_us = (int)x;
      } else if (!strcmp(key, "queue_capacity")) {
        c->queue_capacity = (int)x;
      } else {
        c->request_timeout_s = (double)x / 1000.0;
      }
    } else if (!strcmp(key, "plan")) {
      if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof c->plan) {
        set_error(err, err_len, "%s: 'plan' must be \"auto\" or THREADSxBATCH,...", origin);
        goto out;
      }
      snprintf(c->plan, sizeof c->plan, "%s", json_string_value(v));
    } else if (!strcmp(key, "autoscale")) {
      if (!json_is_boolean(v)) {
        set_error(err, err_len, "%s: 'autoscale' must be true or false", origin);
        goto out;
      }
      c->autoscale = json_is_true(v);
    } else if (!strcmp(key, "estimator")) {
      const char *e = json_string_value(v);
      if (!e || (strcmp(e, "rate") && strcmp(e, "paper"))) {
        set_error(err, err_len, "%s: 'estimator' must be \"rate\" or \"paper\"", origin);
        goto out;
      }
      c->estimator = !strcmp(e, "rate");
    } else if (!strcmp(key, "min_batch_size")) {
      if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096) {
        set_error(err, err_len, "%s: 'min_batch_size' must be 1..4096", origin);
        goto out;
      }
      c->min_batch = (int)json_integer_value(v);
    } else if (!strcmp(key, "dims")) {
      if (!json_is_object(v)) {
        set_error(err, err_len, "%s: 'dims' must map symbolic dimension names to sizes", origin);
        goto out;
      }
      const char *dn;
      json_t *dv;
      json_object_foreach(v, dn, dv) {
        if (c->n_dims == 8 || !json_is_integer(dv) || json_integer_value(dv) < 1 ||
            strlen(dn) >= 64) {
          set_error(err, err_len, "%s: dims: at most 8 names with positive sizes", origin);
          goto out;
        }
        snprintf(c->dim_names[c->n_dims], 64, "%s", dn);
        c->dim_values[c->n_dims++] = json_integer_value(dv);
      }
    } else {
      set_error(
          err, err_len,
          "%s: unknown setting '%s' (known: max_batch_size, max_queue_delay_us, "
          "queue_capacity, request_timeout_ms, plan, autoscale, estimator, min_batch_size, dims)",
          origin, key);
      goto out;
    }
  }
  if (c->min_batch > c->max_batch) {
    set_error(err, err_len, "%s: min_batch_size above max_batch_size", origin);
    goto out;
  }
  rc = 0;
out:
  json_decref(root);
  return rc;
}

int pr_repo_read_config(const char *path, pr_model_config_t *c, char *err, size_t err_len) {
  void *text;
  size_t len;
  if (pr_read_file(path, &text, &len, PR_REPO_CONFIG_MAX)) {
    set_error(err, err_len, "%s: %s", path, strerror(errno));
    return -1;
  }
  int rc = pr_repo_parse_config(text, len, path, c, err, err_len);
  free(text);
  return rc;
}
