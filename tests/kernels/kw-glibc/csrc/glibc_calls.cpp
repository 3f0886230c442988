// Calls whose symbols are newer than glibc 2.28 when linked on a modern machine. Declared
// by hand (no standard headers, so that kernel-wheels' <sys/single_threaded.h> shim does
// not hide __libc_single_threaded, and so that glibc 2.38's C23 name can be called on an
// older glibc too, where the test links it against a stand-in library).
#include <sys/stat.h>

#include <cstdint>

extern "C" {
unsigned int arc4random(void);                               // GLIBC_2.36
unsigned long __isoc23_strtoul(const char*, char**, int);   // GLIBC_2.38
extern char __libc_single_threaded;                         // GLIBC_2.32 (data)
double exp(double);                                         // GLIBC_2.29 (libm)
}

int64_t kw_parse_unsigned(const char* text) { return static_cast<int64_t>(__isoc23_strtoul(text, nullptr, 0)); }

int64_t kw_random_word() { return static_cast<int64_t>(arc4random()); }

int64_t kw_single_threaded() { return __libc_single_threaded; }

double kw_exp(double x) { return exp(x); }

int64_t kw_file_size(const char* path) {
  struct stat info;                                          // stat: GLIBC_2.33
  return stat(path, &info) == 0 ? static_cast<int64_t>(info.st_size) : -1;
}
