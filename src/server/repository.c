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

#include "base/text.h"
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

/* The entry of directory item `item` of dir (a model folder or NAME.onnx);
 * false when it is not a model. */
static bool entry_for(const char *dir, const char *item, pr_repo_entry_t *r) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, item);
  size_t len = strlen(item);
  memset(r, 0, sizeof *r);
  if (len > 5 && !strcmp(item + len - 5, ".onnx") && is_file(p)) {
    snprintf(r->name, sizeof r->name, "%.*s", (int)(len - 5), item);
    if (len - 5 >= sizeof r->name || !valid_name(r->name)) return false;
    snprintf(r->version, sizeof r->version, "1");
    snprintf(r->path, sizeof r->path, "%s", p);
    return true;
  }
  if (!valid_name(item)) return false;
  DIR *md = opendir(p);
  if (!md) return false;
  long best = -1;
  char best_dir[256] = ""; /* the folder as named: "007" is version 7 */
  struct dirent *v;
  while ((v = readdir(md))) {
    char *end;
    errno = 0;
    long ver = strtol(v->d_name, &end, 10);
    if (errno == ERANGE) continue; /* no version that large can be asked for */
    char mp[4096];
    snprintf(mp, sizeof mp, "%s/%s/model.onnx", p, v->d_name);
    if (*end || end == v->d_name || v->d_name[0] < '0' || v->d_name[0] > '9' || ver < 0 ||
        !is_file(mp))
      continue;
    if (ver > best) best = ver, snprintf(best_dir, sizeof best_dir, "%s", v->d_name);
  }
  closedir(md);
  if (best < 0) return false;
  snprintf(r->name, sizeof r->name, "%s", item);
  snprintf(r->version, sizeof r->version, "%ld", best);
  snprintf(r->path, sizeof r->path, "%s/%s/model.onnx", p, best_dir);
  char cp[4096];
  struct stat cs;
  snprintf(cp, sizeof cp, "%s/config.json", p);
  /* anything there is the config: one that is not a file fails the load */
  if (lstat(cp, &cs) == 0) snprintf(r->config, sizeof r->config, "%s", cp);
  return true;
}

int pr_repo_scan(const char *dir, pr_repo_entry_t *out, int max, int *total) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0, all = 0;
  struct dirent *e;
  pr_repo_entry_t tmp;
  while ((e = readdir(d))) {
    pr_repo_entry_t *r = n < max ? &out[n] : &tmp;
    if (!entry_for(dir, e->d_name, r)) continue;
    /* NAME/ and NAME.onnx are one model, NAME (the folder wins) */
    int same = -1;
    for (int i = 0; i < n && same < 0; i++)
      if (r != &out[i] && !strcmp(out[i].name, r->name)) same = i;
    if (same >= 0) {
      if (strcmp(e->d_name, r->name) == 0) out[same] = *r; /* the folder */
      continue;
    }
    all++;
    if (n < max) n++;
  }
  closedir(d);
  if (total) *total = all;
  return n;
}

int pr_repo_find(const char *dir, const char *name, pr_repo_entry_t *out) {
  char item[PR_NAME_MAX + 8];
  if (!valid_name(name)) return -1;
  /* "m.onnx" names the model "m", not a model of its own */
  if (entry_for(dir, name, out) && !strcmp(out->name, name)) return 0;
  snprintf(item, sizeof item, "%s.onnx", name);
  return entry_for(dir, item, out) && !strcmp(out->name, name) ? 0 : -1;
}

/* Error messages quote outside text (keys, paths) and may be cut to the
 * caller's buffer; the server sends them as JSON, which must be UTF-8: the
 * message is cut on a character boundary and bytes that are not UTF-8 become
 * '?' (pr_utf8_sanitize). */
static void set_error(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(char *err, size_t err_len, const char *fmt, ...) {
  char raw[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  if (err_len) pr_utf8_sanitize(raw, err, err_len);
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
  if (!is_file(path)) { /* a folder or a FIFO (which would block the read) */
    set_error(err, err_len, "%s: not a regular file", path);
    return -1;
  }
  if (pr_read_file(path, &text, &len, PR_REPO_CONFIG_MAX)) {
    set_error(err, err_len, "%s: %s", path, strerror(errno));
    return -1;
  }
  int rc = pr_repo_parse_config(text, len, path, c, err, err_len);
  free(text);
  return rc;
}
