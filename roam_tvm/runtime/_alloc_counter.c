/* Aligned-allocation counter, loaded with LD_PRELOAD into a measuring child process.
 *
 * TVM's CPU device API gets every data space (VM storage, tensors, kernel workspace
 * pages) from posix_memalign and returns it with free.  Wrapping the aligned
 * allocators and free, and remembering the size of each aligned block, gives the
 * bytes the runtime holds at any moment and their high-water mark.  Plain malloc is
 * not counted: Python objects, numpy arrays and TVM's own small objects use it.
 *
 * Exported for ctypes: roam_counter_reset_peak, roam_counter_live, roam_counter_peak,
 * roam_counter_count, roam_counter_largest.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_fn)(size_t, size_t);
typedef void (*free_fn)(void *);

static memalign_fn real_posix_memalign;
static aligned_fn real_aligned_alloc;
static aligned_fn real_memalign;
static free_fn real_free;

/* Open-addressing table of live aligned blocks: pointer -> size (tombstones on free). */
#define TABLE_BITS 20
#define TABLE_SIZE (1u << TABLE_BITS)
#define TOMB ((void *)1)
static void *keys[TABLE_SIZE];
static size_t sizes[TABLE_SIZE];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t live_bytes, peak_bytes, n_allocs, largest;

static int resolving;

static void resolve(void) {
  if (!real_free && !resolving) {
    resolving = 1; /* dlsym may free; such a free before we know the real one leaks */
    real_posix_memalign = (memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (aligned_fn)dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = (aligned_fn)dlsym(RTLD_NEXT, "memalign");
    real_free = (free_fn)dlsym(RTLD_NEXT, "free");
    resolving = 0;
  }
}

static size_t slot_of(void *p) {
  uintptr_t h = (uintptr_t)p >> 4;
  h ^= h >> 17;
  h *= 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> (64 - TABLE_BITS));
}

static void remember(void *p, size_t n) {
  if (!p) return;
  pthread_mutex_lock(&lock);
  size_t i = slot_of(p);
  size_t probes = 0;
  while (keys[i] && keys[i] != TOMB && probes < TABLE_SIZE) {
    i = (i + 1) & (TABLE_SIZE - 1);
    probes++;
  }
  if (probes < TABLE_SIZE) {
    keys[i] = p;
    sizes[i] = n;
    live_bytes += (int64_t)n;
    n_allocs++;
    if ((int64_t)n > largest) largest = (int64_t)n;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
  }
  pthread_mutex_unlock(&lock);
}

static void forget(void *p) {
  pthread_mutex_lock(&lock);
  size_t i = slot_of(p);
  size_t probes = 0;
  while (keys[i] && probes < TABLE_SIZE) {
    if (keys[i] == p) {
      live_bytes -= (int64_t)sizes[i];
      keys[i] = TOMB;
      break;
    }
    i = (i + 1) & (TABLE_SIZE - 1);
    probes++;
  }
  pthread_mutex_unlock(&lock);
}

int posix_memalign(void **out, size_t alignment, size_t n) {
  resolve();
  int rc = real_posix_memalign(out, alignment, n);
  if (rc == 0) remember(*out, n);
  return rc;
}

void *aligned_alloc(size_t alignment, size_t n) {
  resolve();
  void *p = real_aligned_alloc(alignment, n);
  remember(p, n);
  return p;
}

void *memalign(size_t alignment, size_t n) {
  resolve();
  void *p = real_memalign(alignment, n);
  remember(p, n);
  return p;
}

void free(void *p) {
  if (!p) return;
  resolve();
  if (!real_free) return;
  forget(p);
  real_free(p);
}

/* The high-water mark restarts at the bytes live now. */
void roam_counter_reset_peak(void) {
  pthread_mutex_lock(&lock);
  peak_bytes = live_bytes;
  largest = 0;
  n_allocs = 0;
  pthread_mutex_unlock(&lock);
}

int64_t roam_counter_live(void) { return live_bytes; }
int64_t roam_counter_peak(void) { return peak_bytes; }
int64_t roam_counter_count(void) { return n_allocs; }
int64_t roam_counter_largest(void) { return largest; }
