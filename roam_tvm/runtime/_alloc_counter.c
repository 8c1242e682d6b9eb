/* Aligned-allocation counter, loaded with LD_PRELOAD into a measuring child process.
 *
 * TVM's CPU device API gets every data space (VM storage, tensors, kernel workspace
 * pages) from posix_memalign and returns it with free.  Wrapping the aligned
 * allocators and free, and remembering the size of each aligned block, gives the
 * bytes the runtime holds at any moment and their high-water mark.  Plain malloc is
 * not counted: Python objects, numpy arrays and TVM's own small objects use it.
 *
 * On CUDA, TVM's device API (libtvm_runtime_cuda.so, linked against libcudart) takes
 * every device data space from cudaMalloc and returns it with cudaFree: VM storages,
 * tensors and kernel workspace pages.  Those two are wrapped the same way, into a
 * second set of counters, so device bytes are counted exactly as host bytes are.
 * The real functions are looked up only when first called, so the counter loads
 * in processes that have no CUDA at all.
 *
 * Exported for ctypes: roam_counter_reset_peak, roam_counter_live, roam_counter_peak,
 * roam_counter_count, roam_counter_largest, and roam_counter_device_{live,peak,count,largest}.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
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
/* One table and one set of totals per memory: host (aligned allocations) and device. */
typedef struct {
  void *keys[TABLE_SIZE];
  size_t sizes[TABLE_SIZE];
  int64_t live_bytes, peak_bytes, n_allocs, largest;
} counter_t;
static counter_t host, device;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

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

static void remember(counter_t *c, void *p, size_t n) {
  if (!p) return;
  pthread_mutex_lock(&lock);
  size_t i = slot_of(p);
  size_t probes = 0;
  while (c->keys[i] && c->keys[i] != TOMB && probes < TABLE_SIZE) {
    i = (i + 1) & (TABLE_SIZE - 1);
    probes++;
  }
  if (probes < TABLE_SIZE) {
    c->keys[i] = p;
    c->sizes[i] = n;
    c->live_bytes += (int64_t)n;
    c->n_allocs++;
    if ((int64_t)n > c->largest) c->largest = (int64_t)n;
    if (c->live_bytes > c->peak_bytes) c->peak_bytes = c->live_bytes;
  }
  pthread_mutex_unlock(&lock);
}

static void forget(counter_t *c, void *p) {
  pthread_mutex_lock(&lock);
  size_t i = slot_of(p);
  size_t probes = 0;
  while (c->keys[i] && probes < TABLE_SIZE) {
    if (c->keys[i] == p) {
      c->live_bytes -= (int64_t)c->sizes[i];
      c->keys[i] = TOMB;
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
  if (rc == 0) remember(&host, *out, n);
  return rc;
}

void *aligned_alloc(size_t alignment, size_t n) {
  resolve();
  void *p = real_aligned_alloc(alignment, n);
  remember(&host, p, n);
  return p;
}

void *memalign(size_t alignment, size_t n) {
  resolve();
  void *p = real_memalign(alignment, n);
  remember(&host, p, n);
  return p;
}

void free(void *p) {
  if (!p) return;
  resolve();
  if (!real_free) return;
  forget(&host, p);
  real_free(p);
}

/* cudaError_t is an int-sized enum; 0 is cudaSuccess.  The device pointer is only a key. */
typedef int (*cuda_malloc_fn)(void **, size_t);
typedef int (*cuda_free_fn)(void *);
static cuda_malloc_fn real_cuda_malloc;
static cuda_free_fn real_cuda_free;

int cudaMalloc(void **out, size_t n);
int cudaFree(void *p);

/* libcudart is usually loaded with RTLD_LOCAL, as a dependency of a library that was
 * itself dlopen'ed (TVM's CUDA runtime), so RTLD_NEXT does not see it.  Then every
 * loaded object is asked, through its own handle, for the symbol. */
struct lookup {
  const char *name;
  void *self;
  void *found;
};

static int ask_object(struct dl_phdr_info *info, size_t size, void *data) {
  struct lookup *q = (struct lookup *)data;
  (void)size;
  if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
  void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  void *sym = dlsym(h, q->name);
  dlclose(h);
  if (sym && sym != q->self) {
    q->found = sym;
    return 1;
  }
  return 0;
}

static void *find_real(const char *name, void *self) {
  void *sym = dlsym(RTLD_NEXT, name);
  if (sym && sym != self) return sym;
  struct lookup q = {name, self, NULL};
  dl_iterate_phdr(ask_object, &q);
  return q.found;
}

int cudaMalloc(void **out, size_t n) {
  if (!real_cuda_malloc) real_cuda_malloc = (cuda_malloc_fn)find_real("cudaMalloc", (void *)cudaMalloc);
  if (!real_cuda_malloc) return 2; /* cudaErrorMemoryAllocation: no CUDA runtime below us */
  int rc = real_cuda_malloc(out, n);
  if (rc == 0) remember(&device, *out, n);
  return rc;
}

int cudaFree(void *p) {
  if (!real_cuda_free) real_cuda_free = (cuda_free_fn)find_real("cudaFree", (void *)cudaFree);
  if (!real_cuda_free) return 0;
  if (p) forget(&device, p);
  return real_cuda_free(p);
}

/* The high-water marks restart at the bytes live now. */
void roam_counter_reset_peak(void) {
  pthread_mutex_lock(&lock);
  host.peak_bytes = host.live_bytes;
  host.largest = 0;
  host.n_allocs = 0;
  device.peak_bytes = device.live_bytes;
  device.largest = 0;
  device.n_allocs = 0;
  pthread_mutex_unlock(&lock);
}

int64_t roam_counter_live(void) { return host.live_bytes; }
int64_t roam_counter_peak(void) { return host.peak_bytes; }
int64_t roam_counter_count(void) { return host.n_allocs; }
int64_t roam_counter_largest(void) { return host.largest; }
int64_t roam_counter_device_live(void) { return device.live_bytes; }
int64_t roam_counter_device_peak(void) { return device.peak_bytes; }
int64_t roam_counter_device_count(void) { return device.n_allocs; }
int64_t roam_counter_device_largest(void) { return device.largest; }
