/* torch_layer.c - the PyTorch layer under a plain LD_PRELOAD.
 *
 * `cumemtrace run` boots src/torchboot through PYTHONPATH.  Without it, at
 * the first allocation of a process running CPython we ask the interpreter
 * to do the same at a safe point: Py_AddPendingCall needs neither the GIL
 * nor a thread state (we may be inside PyTorch's allocator lock), and
 * CPython runs the call in the main thread, with the GIL, between two
 * bytecodes.  The code binds no name in __main__ (it runs in a dict of its
 * own), loads cumemtrace_torch from the torchboot directory beside the
 * library, and does nothing when the layer is already there. */
#include "python.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char layer_code[2048];
static int layer_armed, layer_tries;
static struct python_layer_api py; /* set before the pending call is queued */
#define LAYER_TRIES 64 /* allocations that may look for torch */

/* True when the process has imported torch (asked without running Python
 * code: neither call creates a GC-tracked object). */
static bool torch_imported(void)
{
    void *name = py.unicode("torch");
    if (name == NULL)
        return false;
    void *m = py.get_module(name);
    py.decref(name);
    if (m == NULL)
        return false;
    py.decref(m);
    return true;
}

static int run_layer(void *arg)
{
    (void)arg;
    /* Not a PyTorch process (yet): run no Python code at all; a later
     * allocation looks again. */
    if (!torch_imported()) {
        __atomic_store_n(&layer_armed, 0, __ATOMIC_RELEASE);
        return 0;
    }
    py.run_simple(layer_code);
    return 0; /* a failure was said by the code itself */
}

/* The torchboot directory beside this library (build tree) or in its
 * prefix; false when neither holds cumemtrace_torch.py. */
static bool layer_dir(char *out, size_t n)
{
    Dl_info info;
    if (dladdr((void *)&python_arm_torch_layer, &info) == 0 || info.dli_fname == NULL)
        return false;
    char lib[960];
    if (strlen(info.dli_fname) >= sizeof lib)
        return false;
    memcpy(lib, info.dli_fname, strlen(info.dli_fname) + 1);
    char *slash = strrchr(lib, '/');
    if (slash == NULL)
        return false;
    *slash = '\0';
    static const char *const rel[] = {"/share/cumemtrace/torchboot",
                                      "/../share/cumemtrace/torchboot"};
    for (size_t i = 0; i < 2; i++) {
        char probe[1200];
        snprintf(out, n, "%s%s", lib, rel[i]);
        snprintf(probe, sizeof probe, "%s/cumemtrace_torch.py", out);
        if (access(probe, R_OK) == 0)
            return true;
    }
    return false;
}

/* Loads cumemtrace_torch without registering it in sys.modules (the host
 * sees no module of ours), unless the layer is there already (torch.cuda
 * carries its mark). */
static const char layer_fmt[] =
    "__import__('builtins').exec(\"\"\"\n"
    "import sys\n"
    "c = sys.modules.get('torch.cuda')\n"
    "if c is not None and not getattr(c, '_cumemtrace_layer', False):\n"
    "    try:\n"
    "        x = sys.modules['_frozen_importlib_external']\n"
    "        s = x.spec_from_file_location('cumemtrace_torch', '%s/cumemtrace_torch.py')\n"
    "        m = sys.modules['_frozen_importlib'].module_from_spec(s)\n"
    "        s.loader.exec_module(m)\n"
    "        m.install()\n"
    "    except Exception as e:\n"
    "        sys.stderr.write('cumemtrace: warning: the PyTorch layer is off (%%s); '\n"
    "                         'post-mortems show driver-level figures only' %% e + chr(10))\n"
    "\"\"\", {})\n";

void python_arm_torch_layer(void)
{
    if (__atomic_load_n(&python_mode, __ATOMIC_ACQUIRE) != PYTHON_ON ||
        __atomic_load_n(&layer_armed, __ATOMIC_ACQUIRE) ||
        __atomic_exchange_n(&layer_armed, 1, __ATOMIC_ACQ_REL) ||
        __atomic_add_fetch(&layer_tries, 1, __ATOMIC_RELAXED) > LAYER_TRIES)
        return;
    char dir[1024];
    if (!python_layer_api(&py) || !layer_dir(dir, sizeof dir))
        return;
    for (const char *c = dir; *c; c++)
        if (*c == '\'' || *c == '"' || *c == '\\' || *c == '\n')
            return; /* not a path we can quote safely: no layer */
    snprintf(layer_code, sizeof layer_code, layer_fmt, dir);
    py.add_pending(run_layer, NULL);
}
