#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int level_set = 0;
static pr_log_level_t min_level = PR_LOG_INFO;

void pr_log_set_level(pr_log_level_t level) {
  min_level = level;
  level_set = 1;
}

static void init_level(void) {
  const char *env = getenv("PACKRAT_LOG");
  if (env) {
    if (!strcmp(env, "debug")) min_level = PR_LOG_DEBUG;
    else if (!strcmp(env, "warn")) min_level = PR_LOG_WARN;
    else if (!strcmp(env, "error")) min_level = PR_LOG_ERROR;
  }
  level_set = 1;
}

void pr_log(pr_log_level_t level, const char *fmt, ...) {
  static const char *names[] = {"debug", "info", "warn", "error"};
  if (!level_set) init_level();
  if (level < min_level) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n", tm.tm_year + 1900,
          tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
          names[level], msg);
}

void pr_errf(char *buf, size_t len, const char *fmt, ...) {
  if (!buf || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}
