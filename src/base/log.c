#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Any thread logs: the level comes from PACKRAT_LOG once (pthread_once),
 * and the settings are atomics (set before threads start, in practice). */
static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static _Atomic int min_level = PR_LOG_INFO;
static _Atomic int json_lines = 0;

void pr__log_set_json(int on) {
  json_lines = on;
}

static void init_level(void);

void pr__log_set_level(pr_log_level_t level) {
  pthread_once(&level_once, init_level);
  min_level = (int)level;
}

static void init_level(void) {
  const char *env = getenv("PACKRAT_LOG");
  if (env) {
    if (!strcmp(env, "debug"))
      min_level = PR_LOG_DEBUG;
    else if (!strcmp(env, "warn"))
      min_level = PR_LOG_WARN;
    else if (!strcmp(env, "error"))
      min_level = PR_LOG_ERROR;
  }
}

void pr__log(pr_log_level_t level, const char *fmt, ...) {
  static const char *names[] = {"debug", "info", "warn", "error"};
  pthread_once(&level_once, init_level);
  if ((int)level < min_level) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[40];
  snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  if (!json_lines) {
    fprintf(stderr, "%s %-5s %s\n", when, names[level], msg);
    return;
  }
  char esc[2100];
  size_t o = 0;
  for (const char *p = msg; *p && o < sizeof esc - 8; p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == '"' || ch == '\\')
      esc[o++] = '\\', esc[o++] = (char)ch;
    else if (ch < 0x20)
      o += (size_t)snprintf(esc + o, sizeof esc - o, "\\u%04x", ch);
    else
      esc[o++] = (char)ch;
  }
  esc[o] = 0;
  fprintf(stderr, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", when, names[level], esc);
}

void pr__errf(char *buf, size_t len, const char *fmt, ...) {
  if (!buf || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}
