/* Shadows glibc's <sys/single_threaded.h> (glibc >= 2.32) for kernel-wheels builds.
 *
 * Why: when this header exists, libstdc++ (gcc >= 11) reads the variable
 * `__libc_single_threaded@GLIBC_2.32` to decide whether reference counts
 * (std::shared_ptr, std::string COW, locale facets) may skip atomic instructions.
 * That one symbol version makes every extension require glibc 2.32, above the
 * manylinux_2_28 promise of Hub kernels.
 *
 * Why it is safe: declaring the flag as a constant 0 ("never single-threaded")
 * makes libstdc++ always take the atomic path, which is correct in every program;
 * it is exactly what libstdc++ does on a glibc older than 2.32, where the header
 * does not exist. Only the single-threaded fast path is lost, and no object layout
 * or ABI changes: the flag is read, never stored in any type.
 */
#ifndef KERNEL_WHEELS_SINGLE_THREADED_SHIM_H
#define KERNEL_WHEELS_SINGLE_THREADED_SHIM_H
#ifdef __cplusplus
extern "C++" {
#endif
static const char __libc_single_threaded = 0;
#ifdef __cplusplus
}
#endif
#endif
