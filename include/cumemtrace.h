/* cumemtrace.h - the public API of libcumemtrace.so.
 *
 * Nothing here is needed to trace a program: LD_PRELOAD the library and every
 * CUDA allocation is recorded.  These functions let a program that knows it
 * runs under cumemtrace ask for a snapshot at a moment of its choosing (after
 * the first training step, before a checkpoint).  Resolve them with
 * dlsym(RTLD_DEFAULT, "cumemtrace_dump") so the program still runs without
 * the library.
 */
#ifndef CUMEMTRACE_H
#define CUMEMTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

#define CUMEMTRACE_VERSION_MAJOR 0
#define CUMEMTRACE_VERSION_MINOR 1
#define CUMEMTRACE_VERSION_PATCH 0

/* Writes a snapshot now, with reason "api".  `path` names the file, or NULL
 * to name it from CUMEMTRACE_OUTPUT (with ".api.<n>" before ".json").  An
 * existing file is never overwritten: a free name "<path>.<n>" is used.
 * Returns 0, or -1 after printing why on stderr (unwritable path, tracing
 * disabled).  Thread-safe. */
int cumemtrace_dump(const char *path);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *cumemtrace_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMTRACE_H */
