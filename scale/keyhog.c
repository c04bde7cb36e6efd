/* Preloaded by scripts/test under smpirun: takes all but KEYHOG_FREE (default 8) of the
 * process's pthread keys when it is loaded, so that a handful of simulated ranks do what 1,024
 * do with all of glibc's keys. aiac's SMPI build must then still run 16 ranks, each loaded as a
 * copy of the library (privatization dlopen): it does when the ranks share one Rust std, and
 * aborted with "out of TLS keys" when each copy brought its own (docs/scale.md). */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

__attribute__((constructor)) static void keyhog(void) {
  const char *env = getenv("KEYHOG_FREE");
  int keep = env ? atoi(env) : 8;
  pthread_key_t taken[PTHREAD_KEYS_MAX];
  int n = 0;
  while (n < PTHREAD_KEYS_MAX && pthread_key_create(&taken[n], NULL) == 0)
    n++;
  /* Give back the last `keep`: the next keys created get them. */
  for (int i = n - 1; i >= 0 && i >= n - keep; i--)
    pthread_key_delete(taken[i]);
}
