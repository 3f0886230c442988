/* Local definitions of glibc symbols newer than manylinux_2_28 (glibc 2.28), for
 * `kernel-wheels build` on hosts with a newer glibc.
 *
 * Why: the parts of a newer libstdc++ that kernel-wheels links statically (see
 * symbol_versions.py) were compiled against the build machine's glibc, and reference
 * what it has: `__libc_single_threaded` (2.32), `arc4random` (2.36), the stat
 * functions (2.33). A binary importing them does not load on the systems Hub kernels
 * promise to support. A definition here, linked into the extension and hidden,
 * satisfies the reference instead; glibc's copy is never asked for.
 *
 * Only the definitions a link needs are compiled: each one is guarded by
 * KW_DEFINE_<symbol>, which the builder sets. This file is compiled as C without
 * _GNU_SOURCE, so that glibc's headers do not redirect its own calls to the C23
 * names (`strtoul` -> `__isoc23_strtoul`), and it calls only functions glibc 2.28
 * already has.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define KW_LOCAL __attribute__((visibility("hidden")))

#if defined(KW_DEFINE___libc_single_threaded)
/* libstdc++ reads this flag to skip atomic reference counts in a process that never
 * started a thread. 0 ("maybe threaded") always takes the atomic path, which is right
 * in every process: it is what libstdc++ does on a glibc older than 2.32. */
KW_LOCAL char __libc_single_threaded = 0;
#endif

#if defined(KW_DEFINE_arc4random) || defined(KW_DEFINE_arc4random_buf) || \
    defined(KW_DEFINE_arc4random_uniform)
#include <sys/random.h>

/* glibc's arc4random family reads the kernel's random source (getrandom, glibc 2.25)
 * and aborts when it cannot, as this does. */
static void kw_random_bytes(void *buffer, size_t size) {
  unsigned char *next = buffer;
  while (size > 0) {
    ssize_t got = getrandom(next, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      abort();
    }
    next += got;
    size -= (size_t)got;
  }
}

KW_LOCAL uint32_t arc4random(void) {
  uint32_t value;
  kw_random_bytes(&value, sizeof value);
  return value;
}

KW_LOCAL void arc4random_buf(void *buffer, size_t size) { kw_random_bytes(buffer, size); }

KW_LOCAL uint32_t arc4random_uniform(uint32_t upper_bound) {
  if (upper_bound < 2) return 0;
  /* Reject the values below 2^32 mod upper_bound, so that every result is equally likely. */
  uint32_t minimum = (uint32_t)(-upper_bound) % upper_bound;
  for (;;) {
    uint32_t value = arc4random();
    if (value >= minimum) return value % upper_bound;
  }
}
#endif

#if defined(KW_DEFINE_stat) || defined(KW_DEFINE_stat64) || defined(KW_DEFINE_fstat) || \
    defined(KW_DEFINE_fstat64) || defined(KW_DEFINE_lstat) || defined(KW_DEFINE_lstat64) || \
    defined(KW_DEFINE_fstatat) || defined(KW_DEFINE_fstatat64)
#include <sys/stat.h>

/* Before glibc 2.33 the stat functions were inline wrappers around __xstat and its
 * siblings, which take the layout version of struct stat first; glibc still exports
 * them under their old version. KW_STAT_VER and KW_XSTAT_VERSION come from the
 * builder (x86_64: 1 and GLIBC_2.2.5; aarch64: 0 and GLIBC_2.17). */
#define KW_STR2(x) #x
#define KW_STR(x) KW_STR2(x)
int kw_xstat(int, const char *, struct stat *);
int kw_fxstat(int, int, struct stat *);
int kw_lxstat(int, const char *, struct stat *);
int kw_fxstatat(int, int, const char *, struct stat *, int);
__asm__(".symver kw_xstat, __xstat@" KW_STR(KW_XSTAT_VERSION));
__asm__(".symver kw_fxstat, __fxstat@" KW_STR(KW_XSTAT_VERSION));
__asm__(".symver kw_lxstat, __lxstat@" KW_STR(KW_XSTAT_VERSION));
__asm__(".symver kw_fxstatat, __fxstatat@" KW_STR(KW_XSTAT_VERSION));

/* struct stat and struct stat64 are one layout on 64-bit Linux. */
#if defined(KW_DEFINE_stat)
KW_LOCAL int stat(const char *path, struct stat *buffer) { return kw_xstat(KW_STAT_VER, path, buffer); }
#endif
#if defined(KW_DEFINE_stat64)
KW_LOCAL int stat64(const char *path, struct stat *buffer) { return kw_xstat(KW_STAT_VER, path, buffer); }
#endif
#if defined(KW_DEFINE_lstat)
KW_LOCAL int lstat(const char *path, struct stat *buffer) { return kw_lxstat(KW_STAT_VER, path, buffer); }
#endif
#if defined(KW_DEFINE_lstat64)
KW_LOCAL int lstat64(const char *path, struct stat *buffer) { return kw_lxstat(KW_STAT_VER, path, buffer); }
#endif
#if defined(KW_DEFINE_fstat)
KW_LOCAL int fstat(int fd, struct stat *buffer) { return kw_fxstat(KW_STAT_VER, fd, buffer); }
#endif
#if defined(KW_DEFINE_fstat64)
KW_LOCAL int fstat64(int fd, struct stat *buffer) { return kw_fxstat(KW_STAT_VER, fd, buffer); }
#endif
#if defined(KW_DEFINE_fstatat)
KW_LOCAL int fstatat(int dirfd, const char *path, struct stat *buffer, int flags) {
  return kw_fxstatat(KW_STAT_VER, dirfd, path, buffer, flags);
}
#endif
#if defined(KW_DEFINE_fstatat64)
KW_LOCAL int fstatat64(int dirfd, const char *path, struct stat *buffer, int flags) {
  return kw_fxstatat(KW_STAT_VER, dirfd, path, buffer, flags);
}
#endif
#endif
