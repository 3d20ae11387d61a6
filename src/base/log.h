/* Logging to stderr with levels; thread-safe (one fprintf per message). */
#ifndef PR_BASE_LOG_H
#define PR_BASE_LOG_H

#include <stdarg.h>
#include <stddef.h>

typedef enum { PR_LOG_DEBUG = 0, PR_LOG_INFO, PR_LOG_WARN, PR_LOG_ERROR } pr_log_level_t;

/* Minimum level printed; set from PACKRAT_LOG (debug|info|warn|error) on first use. */
void pr__log_set_level(pr_log_level_t level);
/* Lines as plain text (default) or as one JSON object each. */
void pr__log_set_json(int on);
void pr__log(pr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* snprintf into an error buffer (buf may be NULL or len 0). */
void pr__errf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
