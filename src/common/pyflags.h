/* pyflags.h - what a command line tells of a Python interpreter's start-up.
 * Stateless; linked by the CLI (`run`) and the library (its constructor).
 */
#ifndef CUMEMTRACE_PYFLAGS_H
#define CUMEMTRACE_PYFLAGS_H

#include <stdbool.h>

/* True when argv (NULL-terminated) runs a Python - argv[0]'s base name
 * begins "python" - with -E or -I (PYTHONPATH ignored) or -S (site, and
 * with it a sitecustomize, not imported), read among the interpreter's
 * options up to the script, -c or -m.  Such a Python never runs the PyTorch
 * layer's sitecustomize: PYTHONPATH would only show our directory to it. */
bool pyflags_skips_site(char *const *argv);

#endif
