/*
 * kc_glibc.h — pins the glibc symbol versions the capture libraries link, so that a library built
 * on a new glibc (Debian 12: 2.36) loads into applications on glibc 2.17 and later (RHEL 7/8,
 * Ubuntu 20.04: the manylinux2014 tag of the release wheel, scripts/build-wheel.py).
 *
 * Force-included into every C unit of both libraries (`gcc -include c/common/kc_glibc.h`, by
 * scripts/build-c.sh and scripts/build-hsa.sh), so no unit has to remember it. What it pins:
 *   - dl* and pthread_create/join/once/detach moved from libdl/libpthread into libc in 2.34 and
 *     got a new default version there (GLIBC_2.34); the old versions are still exported, so each
 *     reference is bound to the architecture's base version (x86_64 GLIBC_2.2.5, aarch64
 *     GLIBC_2.17). The build scripts also link libdl.so.2 and libpthread.so.0 with
 *     --no-as-needed: on a glibc before 2.34 those symbols live there, and the dynamic linker
 *     finds them only in a loaded object.
 *   - memcpy@GLIBC_2.14 (x86_64): the base version is the one that tolerates overlap, a superset.
 *   - fstat became a libc symbol in 2.33 (before, an inline call of __fxstat); it is replaced by
 *     the fstat system call, whose struct stat is glibc's on x86_64 and aarch64.
 * aligned_alloc (2.16) and clock_gettime (2.17) already fit 2.17. test/cpu/glibc.test.ts reads the
 * ELF version needs of every shipped binary and fails above the wheel's tag.
 */
#ifndef KC_GLIBC_H
#define KC_GLIBC_H

#ifdef __linux__
/* every unit defines _GNU_SOURCE (empty) before its first include; this header comes before that,
   and features.h (which defines __GLIBC__) reads it once, so it is defined the same way here */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <features.h>
#endif

#if defined(__linux__) && defined(__GLIBC__)

#if defined(__x86_64__)
#define KC_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define KC_GLIBC_BASE "GLIBC_2.17"
#endif

#ifdef KC_GLIBC_BASE
#define KC_GLIBC_PIN(sym) __asm__(".symver " #sym "," #sym "@" KC_GLIBC_BASE)
KC_GLIBC_PIN(dlopen);
KC_GLIBC_PIN(dlsym);
KC_GLIBC_PIN(dladdr);
KC_GLIBC_PIN(dlclose);
KC_GLIBC_PIN(dlerror);
KC_GLIBC_PIN(pthread_create);
KC_GLIBC_PIN(pthread_join);
KC_GLIBC_PIN(pthread_once);
KC_GLIBC_PIN(pthread_detach);
KC_GLIBC_PIN(pthread_key_create);
KC_GLIBC_PIN(pthread_getspecific);
KC_GLIBC_PIN(pthread_setspecific);
#if defined(__x86_64__)
KC_GLIBC_PIN(memcpy);
#endif
#undef KC_GLIBC_PIN
#endif

#if __GLIBC__ == 2 && __GLIBC_MINOR__ >= 33
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
static inline int kc_fstat_syscall(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }
#define fstat(fd, st) kc_fstat_syscall((fd), (st))
#endif

#endif /* __linux__ && __GLIBC__ */
#endif /* KC_GLIBC_H */
