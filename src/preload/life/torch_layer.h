/* torch_layer.h - the library's side of the PyTorch layer: loading it
 * (torch_layer_watch_imports below; python.h, python_arm_torch_layer) and
 * asking it for fresh figures before a dump (below).  See torch_layer.c. */
#ifndef CUMEMTRACE_TORCH_LAYER_H
#define CUMEMTRACE_TORCH_LAYER_H

#include <stdbool.h>
#include <stdint.h>

/* How long a dump waits for the layer's answer, at most: the interpreter's
 * main thread runs it between two bytecodes, which a long call that keeps
 * the GIL (or no return to Python at all) delays without bound. */
#define TORCH_REFRESH_WAIT_MS 200
/* Once it runs, how long its reading may take (memory_stats, the segment
 * snapshot, a scan of the collector's objects for the roles). */
#define TORCH_REFRESH_RUN_MS 5000

/* Before a signal, periodic or API dump, from the thread that writes it,
 * holding none of the library's locks: when the PyTorch layer registered
 * its refresh (cumemtrace_allocator_refresher), has it report PyTorch's
 * current figures (cumemtrace_allocator_state) - on this thread when it
 * holds the GIL or is Python's main thread, else on the main thread through
 * Py_AddPendingCall, waiting at most TORCH_REFRESH_WAIT_MS for it to start
 * (and TORCH_REFRESH_RUN_MS more for it to finish).  With `hold`
 * (a termination signal's dump) the main thread, once it has reported,
 * waits there (at most 5 s) for the process to end, as it would have
 * without us.  What became of it is noted for this thread's next document
 * (allocator_refresh_note).  Never raises into the host, never blocks
 * without bound, does nothing without a registered refresh. */
void torch_layer_refresh(bool hold);

/* The wall time the layer's readings have taken, in total, on whichever
 * thread ran them (Python's main thread, mostly): what a paced dump's
 * refresh cost the host (background.c). */
int64_t torch_layer_reading_ns(void);

/* For the termination-signal handler (async-signal-safe): true when the
 * calling thread is Python's main thread and a refresh is registered - the
 * handler then returns, so that the main thread can answer the dump. */
bool torch_layer_main_thread_answers(void);

/* From the constructor, in every process: a Python that ignores
 * PYTHONPATH (-E, -I) or skips site (-S), started by a program `cumemtrace
 * run` ran (a shell), never runs the layer's sitecustomize, which gives the
 * host back the PYTHONPATH it had; this does it instead, before the
 * interpreter reads its environment, so that it sees no directory of ours
 * (the library's own hook loads the layer there). */
void torch_layer_python_env(void);

/* From initialisation, before Py_Initialize: when the process runs
 * CPython (3.8 on), adds the audit hook in C that loads the layer once
 * torch.cuda is imported (torch_layer.c, the top), also under
 * CUMEMTRACE_PYTHON=0; then no allocation asks for it
 * (python_arm_torch_layer).  Without one nothing changes. */
void torch_layer_watch_imports(void);

/* In a fork child: no call of ours is queued or waited for there. */
void torch_layer_atfork_child(void);

#endif
