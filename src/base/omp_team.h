/* The OpenMP team size of the calling thread's next parallel regions (and of
 * the oneDNN primitives it creates). The ThreadSanitizer build defines
 * PR_SERIAL_OMP: libgomp is not TSan-instrumented, so there every team has
 * one thread and the engine runs serially inside each instance thread; the
 * server's own threads, locks and queues are what that build checks. */
#ifndef PR_BASE_OMP_TEAM_H
#define PR_BASE_OMP_TEAM_H

#include <omp.h>

static inline void pr__omp_team(int threads) {
#ifdef PR_SERIAL_OMP
  (void)threads;
  omp_set_num_threads(1);
#else
  omp_set_num_threads(threads);
#endif
}

/* Ends the calling thread's OpenMP team threads (its next parallel region
 * starts new ones): OpenMP 5's omp_pause_resource_all, soft. */
static inline void pr__omp_release(void) {
#ifndef PR_SERIAL_OMP
  omp_pause_resource_all(omp_pause_soft);
#endif
}

#endif
