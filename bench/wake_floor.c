/* The operating system's floor under a served request: what the three
 * steps every request of `packrat serve` takes outside compute cost on
 * this machine when nothing of packrat runs, so that bench/serve.py's
 * stage times can be read against it.
 *
 * A request crosses threads twice and the network once: the HTTP thread
 * hands it to an instance's thread (a condition variable), the instance
 * hands the answer back (libmicrohttpd's resume: an eventfd its epoll
 * thread waits on), and the HTTP thread sends it (a TCP send to a client
 * that waits in recv). Each is timed here between two threads pinned to
 * different CPUs, both ways the server meets it:
 *   hot:   back to back, every 100 us;
 *   after a pass: after both CPUs streamed --pass-mb MB between them, as
 *         a two-thread model pass does (ResNet-50 reads about 100 MB): the
 *         caches hold the model's data, not the server's, and the woken
 *         thread's CPU has just gone idle.
 * The send is timed again with the reader's CPU idle for --idle-ms while
 * the sender streams alone (one instance's pass with the client's core
 * asleep, as ResNet-50 on one connection meets it), the reader asleep in
 * recv (the send then wakes an idle CPU: under a hypervisor a halted vCPU)
 * and polling (a busy-polling client, or one on another host: no wake).
 * The two wakes are timed again with both threads on one CPU, as
 * `packrat serve` meets them when the HTTP thread has moved to the core of
 * the instance it hands a request to (--http-colocate): the waker blocks
 * (waits for the answer, or for the next request) and the woken thread runs
 * there, no other CPU woken.
 * Prints p50 and p90 in microseconds of each (the wake: from before the
 * waker's call to the woken thread running; the send: the sender's call,
 * and until the reader has the bytes).
 *
 * usage: wake_floor [--pass-mb 100] [--rounds 200] [--bytes 4298] [--idle-ms 25] [--json] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&t, NULL);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[(int)(p * (n - 1))];
}

typedef struct {
  int rounds;
  size_t pass_bytes, send_bytes;
  double idle_ms; /* the last case's idle */
  bool cold;
  double idle_s; /* > 0: the sender alone streams this long (the reader's CPU idles) */
  unsigned char *big;
  int cpu_a, cpu_b;
  pthread_barrier_t start, done; /* the pass's two halves */
} opts_t;

static void stream(unsigned char *p, size_t n) {
  for (size_t k = 0; k < n; k += 64) p[k]++;
}

/* The pass's other half, on the woken thread's CPU. */
static void *pass_half(void *arg) {
  opts_t *o = arg;
  pin(o->cpu_b);
  for (;;) {
    pthread_barrier_wait(&o->start);
    if (!o->cold) break;
    stream(o->big + o->pass_bytes / 2, o->pass_bytes / 2);
    pthread_barrier_wait(&o->done);
  }
  return NULL;
}

/* Before a round: back to back (hot), a model pass on both CPUs, or one
 * instance's pass on the sender's CPU alone while the reader's idles. */
static void before_round(opts_t *o) {
  if (o->idle_s > 0) {
    double t0 = now();
    do stream(o->big, o->pass_bytes / 2);
    while (now() - t0 < o->idle_s);
    return;
  }
  if (!o->cold) {
    sleep_s(100e-6);
    return;
  }
  pthread_barrier_wait(&o->start);
  stream(o->big, o->pass_bytes / 2);
  pthread_barrier_wait(&o->done);
}

/* ---- condition variable: the HTTP thread hands a request over ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int seq, seen;
  double t_woken;
  const opts_t *o;
  int cpu; /* the woken thread's */
} cv_t;

static void *cv_waiter(void *arg) {
  cv_t *c = arg;
  pin(c->cpu);
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (c->seq == c->seen) pthread_cond_wait(&c->cv, &c->mu);
    c->t_woken = now();
    c->seen = c->seq;
    pthread_cond_broadcast(&c->cv);
    if (c->seq < 0) break;
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void time_condvar(opts_t *o, int cpu, double *out) {
  cv_t c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, o, cpu};
  pthread_t t;
  pthread_create(&t, NULL, cv_waiter, &c);
  pin(o->cpu_a);
  for (int i = -10; i < o->rounds; i++) {
    before_round(o);
    pthread_mutex_lock(&c.mu);
    double t0 = now();
    c.seq++;
    pthread_cond_signal(&c.cv);
    while (c.seen != c.seq) pthread_cond_wait(&c.cv, &c.mu);
    if (i >= 0) out[i] = (c.t_woken - t0) * 1e6;
    pthread_mutex_unlock(&c.mu);
  }
  pthread_mutex_lock(&c.mu);
  c.seq = -1;
  pthread_cond_signal(&c.cv);
  pthread_mutex_unlock(&c.mu);
  pthread_join(t, NULL);
}

/* ---- eventfd into epoll: the answer wakes the HTTP thread ---- */

typedef struct {
  int efd, back, ep;
  _Atomic double t_woken;
  const opts_t *o;
  int cpu; /* the woken thread's */
} ev_t;

static void *ev_waiter(void *arg) {
  ev_t *e = arg;
  pin(e->cpu);
  for (;;) {
    struct epoll_event ev;
    if (epoll_wait(e->ep, &ev, 1, -1) != 1) continue;
    atomic_store(&e->t_woken, now());
    uint64_t v;
    if (read(e->efd, &v, sizeof v) != sizeof v) break;
    if (write(e->back, &v, sizeof v) != sizeof v || v > 1) break;
  }
  return NULL;
}

static void time_eventfd(opts_t *o, int cpu, double *out) {
  ev_t e = {eventfd(0, 0), eventfd(0, 0), epoll_create1(0), 0, o, cpu};
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(e.ep, EPOLL_CTL_ADD, e.efd, &ev);
  pthread_t t;
  pthread_create(&t, NULL, ev_waiter, &e);
  pin(o->cpu_a);
  uint64_t one = 1, v;
  for (int i = -10; i < o->rounds; i++) {
    before_round(o);
    double t0 = now();
    if (write(e.efd, &one, sizeof one) != sizeof one) break;
    if (read(e.back, &v, sizeof v) != sizeof v) break;
    if (i >= 0) out[i] = (atomic_load(&e.t_woken) - t0) * 1e6;
  }
  uint64_t stop = 2;
  if (write(e.efd, &stop, sizeof stop) == sizeof stop) pthread_join(t, NULL);
  close(e.efd), close(e.back), close(e.ep);
}

/* ---- TCP over loopback: the answer goes to a client in recv ---- */

typedef struct {
  int fd;
  size_t bytes;
  _Atomic double t_read;
  const opts_t *o;
  bool polls; /* recv without sleeping (a busy-polling client) */
} tcp_reader_t;

static void *tcp_reader(void *arg) {
  tcp_reader_t *r = arg;
  pin(r->o->cpu_b);
  char *buf = malloc(r->bytes);
  for (;;) {
    size_t got = 0;
    while (got < r->bytes) {
      ssize_t n = recv(r->fd, buf + got, r->bytes - got, r->polls ? MSG_DONTWAIT : 0);
      if (n < 0 && r->polls && errno == EAGAIN) continue;
      if (n <= 0) goto out;
      got += (size_t)n;
    }
    atomic_store(&r->t_read, now());
    char ack = 1;
    if (send(r->fd, &ack, 1, 0) != 1) break;
  }
out:
  free(buf);
  return NULL;
}

static int tcp_pair(int *server) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
      getsockname(l, (struct sockaddr *)&a, &len))
    return -1;
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a)) return -1;
  *server = accept(l, NULL, NULL);
  close(l);
  setsockopt(*server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return *server < 0 ? -1 : c;
}

static int time_send(opts_t *o, bool polls, double *call, double *arrive) {
  int sfd, cfd = tcp_pair(&sfd);
  if (cfd < 0) return -1;
  tcp_reader_t r = {cfd, o->send_bytes, 0, o, polls};
  pthread_t t;
  pthread_create(&t, NULL, tcp_reader, &r);
  pin(o->cpu_a);
  char *msg = calloc(1, o->send_bytes), ack;
  for (int i = -10; i < o->rounds; i++) {
    before_round(o);
    double t0 = now();
    if (send(sfd, msg, o->send_bytes, MSG_NOSIGNAL) != (ssize_t)o->send_bytes) break;
    double t1 = now();
    if (recv(sfd, &ack, 1, 0) != 1) break;
    if (i >= 0) call[i] = (t1 - t0) * 1e6, arrive[i] = (atomic_load(&r.t_read) - t0) * 1e6;
  }
  shutdown(sfd, SHUT_RDWR);
  pthread_join(t, NULL);
  close(sfd), close(cfd);
  free(msg);
  return 0;
}

int main(int argc, char **argv) {
  opts_t o = {.rounds = 200, .pass_bytes = 100u << 20, .send_bytes = 4298, .idle_ms = 25};
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = true;
    } else if (v && !strcmp(a, "--pass-mb")) {
      o.pass_bytes = (size_t)atol(v) << 20, i++;
    } else if (v && !strcmp(a, "--idle-ms")) {
      o.idle_ms = atof(v), i++;
    } else if (v && !strcmp(a, "--rounds")) {
      o.rounds = atoi(v), i++;
    } else if (v && !strcmp(a, "--bytes")) {
      o.send_bytes = (size_t)atol(v), i++;
    } else {
      fprintf(stderr,
              "usage: wake_floor [--pass-mb 100] [--rounds 200] [--bytes 4298] [--idle-ms 25] "
              "[--json]\n");
      return strcmp(a, "--help") ? 2 : 0;
    }
  }
  if (o.rounds < 10 || o.rounds > 100000 || o.send_bytes < 1 || o.send_bytes > (64u << 20) ||
      o.pass_bytes < (1u << 20) || o.pass_bytes > (8ull << 30) || !(o.idle_ms >= 0.1) ||
      o.idle_ms > 1000) {
    fprintf(stderr,
            "wake_floor: --rounds 10..100000, --bytes 1..64 MiB, --pass-mb 1..8192, --idle-ms "
            "0.1..1000\n");
    return 2;
  }
  long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
  o.cpu_a = 0, o.cpu_b = n_cpu > 1 ? 1 : 0;
  o.big = calloc(1, o.pass_bytes);
  enum { N = 6 };
  double *v[N];
  for (int k = 0; k < N; k++)
    if (!(v[k] = calloc((size_t)o.rounds, sizeof(double)))) return 1;
  if (!o.big) return 1;
  const char *names[N] = {"condvar_wake",           "eventfd_epoll_wake",
                          "tcp_send_call",          "tcp_send_arrive",
                          "condvar_wake_same_core", "eventfd_epoll_wake_same_core"};
  if (json)
    printf("{\"bytes\": %zu, \"pass_mb\": %zu, \"cpus\": %ld", o.send_bytes, o.pass_bytes >> 20,
           n_cpu);
  pthread_barrier_init(&o.start, NULL, 2);
  pthread_barrier_init(&o.done, NULL, 2);
  pthread_t half;
  o.cold = true; /* parked on the barrier while the hot rounds run */
  pthread_create(&half, NULL, pass_half, &o);
  for (int round = 0; round < 2; round++) {
    o.cold = round == 1;
    time_condvar(&o, o.cpu_b, v[0]);
    time_eventfd(&o, o.cpu_b, v[1]);
    if (time_send(&o, false, v[2], v[3])) {
      fprintf(stderr, "wake_floor: no loopback TCP\n");
      return 1;
    }
    time_condvar(&o, o.cpu_a, v[4]);
    time_eventfd(&o, o.cpu_a, v[5]);
    const char *when = o.cold ? "after_pass" : "hot";
    double sum = 0, same = 0;
    for (int k = 0; k < N; k++) {
      double p50 = pct(v[k], o.rounds, 0.5), p90 = pct(v[k], o.rounds, 0.9);
      /* what a request's stages hold of it: the two wakes and the send call */
      if (k < 3) sum += p50;
      if (k >= 4 || k == 2) same += p50;
      if (json)
        printf(", \"%s_%s\": {\"p50_us\": %.1f, \"p90_us\": %.1f}", when, names[k], p50, p90);
      else
        printf("%-10s %-20s p50 %7.1f us  p90 %7.1f us\n", when, names[k], p50, p90);
    }
    if (json)
      printf(", \"%s_path_p50_us\": %.1f, \"%s_path_same_core_p50_us\": %.1f", when, sum, when,
             same);
    else
      printf(
          "%-10s %-20s p50 %7.1f us (the two wakes and the send call)\n"
          "%-10s %-20s p50 %7.1f us (the same, the wakes on one core)\n",
          when, "path", sum, when, "path_same_core", same);
  }
  /* the client's CPU idle through one instance's pass (ResNet-50 on one
   * connection, one core computing): the client asleep in recv, then
   * polling */
  o.cold = false, o.idle_s = o.idle_ms * 1e-3;
  for (int polls = 0; polls < 2; polls++) {
    if (time_send(&o, polls, v[2], v[3])) return 1;
    const char *who = polls ? "idle_polling_reader" : "idle_sleeping_reader";
    for (int k = 2; k < 4; k++) {
      double p50 = pct(v[k], o.rounds, 0.5), p90 = pct(v[k], o.rounds, 0.9);
      if (json)
        printf(", \"%s_%s\": {\"p50_us\": %.1f, \"p90_us\": %.1f}", who, names[k], p50, p90);
      else
        printf("%-20s %-20s p50 %7.1f us  p90 %7.1f us\n", who, names[k], p50, p90);
    }
  }
  if (json) printf(", \"idle_ms\": %g", o.idle_ms);
  o.idle_s = 0;
  pthread_barrier_wait(&o.start); /* the pass thread ends */
  pthread_join(half, NULL);
  if (json) printf("}\n");
  for (int k = 0; k < N; k++) free(v[k]);
  free(o.big);
  return 0;
}
