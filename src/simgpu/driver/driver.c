/* driver.c - the simulated libcuda.so.1: configuration, call accounting,
 * initialisation, error strings, devices and primary contexts.
 *
 * A test double for the GPU, not a mock of the tracer: it keeps real state
 * (driver_vaspace.c places every byte) and answers as NVIDIA's driver
 * documents, so the tracer under test sees what it would see on hardware.
 *
 * Configuration: the SIMCUDA_* variables docs/simgpu.md lists, read once
 * on the first call of any entry point.
 *
 * Threads: one mutex (driver.lock) guards all state; calls are short, so one
 * lock is simple and correct.  The current context is thread-local, as in
 * CUDA.  Fork: the lock is taken around fork() (pthread_atfork) so a child
 * starts with it free and the state consistent, and may go on using the
 * device (NVIDIA's driver does not allow that; tests of forking hosts need it).
 */
#include "driver_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SPEAKER "simcuda"
#define DEFAULT_CAPACITY (UINT64_C(16) << 30)

struct driver_state driver = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t configure_once = PTHREAD_ONCE_INIT;
static atomic_ulong calls[DRIVER_NSYMS];
static _Thread_local struct CUctx_st *current_ctx;

#define DRIVER_SYM_NAME(s, ...) #s,
static const char *const sym_names[] = {DRIVER_SYMBOLS(DRIVER_SYM_NAME)};
#undef DRIVER_SYM_NAME
#define DRIVER_SYM_ALLOCATES(s, a, ...) a,
static const unsigned char sym_allocates[] = {DRIVER_SYMBOLS(DRIVER_SYM_ALLOCATES)};
#undef DRIVER_SYM_ALLOCATES

/* ---- configuration, locking, call accounting ---- */

static void before_fork(void)
{
    pthread_mutex_lock(&driver.lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&driver.lock);
}

static void after_fork_child(void)
{
    /* Only the forking thread survives, and it holds the lock. */
    pthread_mutex_init(&driver.lock, NULL);
}

/* SIMCUDA_NAME, SIMCUDA_CC, SIMCUDA_SMS; a malformed value is reported and
 * the default kept. */
static void configure_identity(struct sim_identity *id)
{
    const char *name = sim_common_getenv("SIMCUDA_NAME");
    snprintf(id->name, sizeof id->name, "%s",
             name != NULL && *name != '\0' ? name : "cumemtrace simulated GPU");
    id->cc_major = 9;
    id->cc_minor = 0;
    const char *cc = sim_common_getenv("SIMCUDA_CC");
    if (cc != NULL) {
        int major = -1, minor = -1, end = 0;
        if (sscanf(cc, "%d.%d%n", &major, &minor, &end) == 2 && cc[end] == '\0' &&
            major >= 1 && major <= 99 && minor >= 0 && minor <= 9) {
            id->cc_major = major;
            id->cc_minor = minor;
        } else {
            sim_common_say(SPEAKER, "ignoring SIMCUDA_CC='%s': expected a compute capability "
                           "like 8.9", cc);
        }
    }
    id->sms = (int)sim_common_env_long(SPEAKER, "SIMCUDA_SMS", 132, 1, 1024);
}

static void configure(void)
{
    configure_identity(&driver.id);
    driver.log = sim_common_env_flag("SIMCUDA_LOG");
    driver.wait_bytes = sim_common_env_size(SPEAKER, "SIMCUDA_WAIT_BYTES", 0, 0,
                                            SIM_MAX_CAPACITY);
    driver.ndevices = (int)sim_common_env_long(SPEAKER, "SIMCUDA_DEVICES", 1, 0,
                                               SIM_MAX_DEVICES);
    uint64_t all = sim_common_env_size(SPEAKER, "SIMCUDA_MEMORY", DEFAULT_CAPACITY,
                                       SIM_PAGE, SIM_MAX_CAPACITY);
    int contiguous = sim_common_env_flag("SIMCUDA_CONTIGUOUS");
    uint64_t reserved = sim_common_env_size(SPEAKER, "SIMCUDA_RESERVED", 0, 0,
                                            SIM_MAX_CAPACITY);
    for (int d = 0; d < driver.ndevices; d++) {
        char name[32];
        snprintf(name, sizeof name, "SIMCUDA_MEMORY_%d", d);
        driver.dev[d].capacity = sim_common_env_size(SPEAKER, name, all, SIM_PAGE,
                                                     SIM_MAX_CAPACITY);
        driver.dev[d].reserved = reserved;
        driver.dev[d].paged = !contiguous && driver.dev[d].capacity <= SIM_PAGED_OFFSET;
        driver.dev[d].ctx.device = d;
    }
    sim_common_fault_parse(&driver.faults, sim_common_getenv("SIMCUDA_FAIL"), SPEAKER, 0,
                           sym_names, DRIVER_NSYMS);
    driver_shared_configure();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void driver_lock(void)
{
    pthread_mutex_lock(&driver.lock);
    driver_shared_enter();
}

void driver_unlock(void)
{
    driver_shared_leave();
    pthread_mutex_unlock(&driver.lock);
}

CUresult driver_enter(enum driver_sym s)
{
    pthread_once(&configure_once, configure);
    unsigned long n = atomic_fetch_add(&calls[s], 1) + 1;
    long code;
    if (!sim_common_fault_hit(&driver.faults, (int)s, n, &code))
        return CUDA_SUCCESS;
    if (code == 0)
        code = sym_allocates[s] ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
    return (CUresult)code;
}

static const char *result_word(CUresult r, int want_name);

CUresult driver_leave(enum driver_sym s, CUresult r, const char *fmt, ...)
{
    if (!driver.log)
        return r;
    char details[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(details, sizeof details, fmt, ap);
    va_end(ap);
    const char *name = result_word(r, 1);
    if (name != NULL)
        sim_common_say(SPEAKER, "%s%s = %s", sym_names[s], details, name);
    else
        sim_common_say(SPEAKER, "%s%s = %d", sym_names[s], details, (int)r);
    return r;
}

CUresult driver_ready(void)
{
    return atomic_load(&driver.initialized) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult driver_ready_args(int bad_args)
{
    CUresult r = driver_ready();
    return r == CUDA_SUCCESS && bad_args ? CUDA_ERROR_INVALID_VALUE : r;
}

int driver_valid_device(int dev)
{
    return dev >= 0 && dev < driver.ndevices;
}

struct CUctx_st *driver_current_context(void)
{
    return current_ctx;
}

CUresult driver_current_device(int *dev)
{
    if (!atomic_load(&driver.initialized))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (current_ctx == NULL || current_ctx->refs == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = current_ctx->device;
    return CUDA_SUCCESS;
}

/* ---- initialisation and versions ---- */

/* With driver.lock held. */
static CUresult init_devices(void)
{
    for (int d = 0; d < driver.ndevices; d++) {
        struct sim_device *sd = &driver.dev[d];
        if (driver_vaspace_pages_init(&sd->pages, sd->capacity / SIM_PAGE) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t base = SIM_DEV_BASE + (uint64_t)d * SIM_DEV_STRIDE;
        driver_vaspace_range_init(&sd->vmm, base + SIM_VMM_OFFSET, base + SIM_DEV_STRIDE);
        driver_vaspace_range_init(&sd->linear, base + SIM_PAGED_OFFSET, base + SIM_VMM_OFFSET);
        CUresult r = driver_pool_init_device(d);
        if (r != CUDA_SUCCESS)
            return r;
    }
    driver_vaspace_range_init(&driver.v1, SIM_V1_BASE, SIM_V1_END);
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags)
{
    DRIVER_ENTER(cuInit);
    CUresult r = CUDA_SUCCESS;
    if (Flags != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (driver.ndevices == 0)
        r = CUDA_ERROR_NO_DEVICE;
    if (r == CUDA_SUCCESS && !atomic_load(&driver.initialized)) {
        driver_lock();
        if (!atomic_load(&driver.initialized)) {
            r = init_devices();
            if (r == CUDA_SUCCESS)
                atomic_store(&driver.initialized, 1);
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuInit, r, "(%u)", Flags);
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    DRIVER_ENTER(cuDriverGetVersion);
    CUresult r = driverVersion == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        *driverVersion = SIM_DRIVER_VERSION;
    return driver_leave(SYM_cuDriverGetVersion, r, "()");
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                             cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    DRIVER_ENTER(cuGetProcAddress_v2);
    CUdriverProcAddressQueryResult st;
    CUresult r = driver_procaddress_lookup(symbol, pfn, cudaVersion, flags, &st);
    if (symbolStatus != NULL && r != CUDA_ERROR_INVALID_VALUE)
        *symbolStatus = st;
    return driver_leave(SYM_cuGetProcAddress_v2, r, "(\"%s\", %d, %llu) status=%d",
                        symbol ? symbol : "(null)", cudaVersion,
                        (unsigned long long)flags, (int)st);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    DRIVER_ENTER(cuGetProcAddress);
    CUdriverProcAddressQueryResult st;
    CUresult r = driver_procaddress_lookup(symbol, pfn, cudaVersion, flags, &st);
    return driver_leave(SYM_cuGetProcAddress, r, "(\"%s\", %d, %llu)",
                        symbol ? symbol : "(null)", cudaVersion, (unsigned long long)flags);
}

/* ---- error strings: NVIDIA's names and texts for the codes the sim uses ---- */

static const struct {
    CUresult code;
    const char *name, *text;
} results[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* The name (or text) of r; NULL for a code the sim does not use. */
static const char *result_word(CUresult r, int want_name)
{
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
        if (results[i].code == r)
            return want_name ? results[i].name : results[i].text;
    return NULL;
}

static CUresult error_text(CUresult error, const char **pStr, int want_name)
{
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pStr = result_word(error, want_name);
    /* as NVIDIA's: an unknown code is an invalid argument */
    return *pStr != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

DRIVER_CALL(cuGetErrorString, (CUresult error, const char **pStr), error_text(error, pStr, 0),
            "(%d)", (int)error)
DRIVER_CALL(cuGetErrorName, (CUresult error, const char **pStr), error_text(error, pStr, 1), "(%d)",
            (int)error)

/* ---- devices ---- */

CUresult driver_check_device(CUdevice dev)
{
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && !driver_valid_device(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    return r;
}

CUresult driver_check_device_args(CUdevice dev, int bad_args)
{
    CUresult r = driver_check_device(dev);
    return r == CUDA_SUCCESS && bad_args ? CUDA_ERROR_INVALID_VALUE : r;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    DRIVER_ENTER(cuDeviceGet);
    CUresult r = driver_ready_args(device == NULL);
    if (r == CUDA_SUCCESS && !driver_valid_device(ordinal))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        *device = ordinal; /* a CUdevice is its ordinal, as on NVIDIA's driver */
    return driver_leave(SYM_cuDeviceGet, r, "(%d)", ordinal);
}

CUresult cuDeviceGetCount(int *count)
{
    DRIVER_ENTER(cuDeviceGetCount);
    CUresult r = driver_ready_args(count == NULL);
    if (r == CUDA_SUCCESS)
        *count = driver.ndevices;
    return driver_leave(SYM_cuDeviceGetCount, r, "() -> %d",
                        r == CUDA_SUCCESS ? driver.ndevices : 0);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceGetName);
    CUresult r = driver_check_device_args(dev, name == NULL || len <= 0);
    if (r == CUDA_SUCCESS)
        snprintf(name, (size_t)len, "%s", driver.id.name);
    return driver_leave(SYM_cuDeviceGetName, r, "(%d)", dev);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceTotalMem_v2);
    CUresult r = driver_check_device_args(dev, bytes == NULL);
    if (r == CUDA_SUCCESS)
        *bytes = driver.dev[dev].capacity;
    return driver_leave(SYM_cuDeviceTotalMem_v2, r, "(%d)", dev);
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceTotalMem);
    CUresult r = driver_check_device_args(dev, bytes == NULL);
    if (r == CUDA_SUCCESS) { /* the 32-bit ABI clamps, as NVIDIA's does */
        uint64_t c = driver.dev[dev].capacity;
        *bytes = c > UINT32_MAX ? UINT32_MAX : (unsigned int)c;
    }
    return driver_leave(SYM_cuDeviceTotalMem, r, "(%d)", dev);
}

/* ---- primary contexts ---- */

void driver_charge_reserved(int dev)
{
    struct sim_device *sd = &driver.dev[dev];
    if (!sd->reserved_charged) {
        uint64_t pages = sd->reserved / SIM_PAGE + (sd->reserved % SIM_PAGE != 0);
        driver_vaspace_reserve_top(&sd->pages, pages);
        sd->reserved_charged = 1;
    }
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    DRIVER_ENTER(cuDevicePrimaryCtxRetain);
    CUresult r = driver_check_device_args(dev, pctx == NULL);
    if (r == CUDA_SUCCESS) {
        struct sim_device *sd = &driver.dev[dev];
        driver_lock();
        sd->ctx.refs++;
        driver_charge_reserved(dev);
        driver_unlock();
        *pctx = &sd->ctx;
    }
    return driver_leave(SYM_cuDevicePrimaryCtxRetain, r, "(%d)", dev);
}

static CUresult ctx_release(CUdevice dev)
{
    CUresult r = driver_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    struct CUctx_st *c = &driver.dev[dev].ctx;
    if (c->refs == 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--c->refs == 0) {
        driver_memory_free_context(c); /* the context is destroyed with its memory */
    }
    driver_unlock();
    return r;
}

DRIVER_CALL(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), ctx_release(dev), "(%d)", dev)
DRIVER_CALL(cuDevicePrimaryCtxRelease, (CUdevice dev), ctx_release(dev), "(%d)", dev)

static CUresult ctx_reset(CUdevice dev)
{
    CUresult r = driver_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    driver_memory_free_context(&driver.dev[dev].ctx); /* the retain count stays, as documented */
    driver_unlock();
    return CUDA_SUCCESS;
}

DRIVER_CALL(cuDevicePrimaryCtxReset_v2, (CUdevice dev), ctx_reset(dev), "(%d)", dev)
DRIVER_CALL(cuDevicePrimaryCtxReset, (CUdevice dev), ctx_reset(dev), "(%d)", dev)

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    DRIVER_ENTER(cuDevicePrimaryCtxGetState);
    CUresult r = driver_check_device_args(dev, flags == NULL || active == NULL);
    if (r == CUDA_SUCCESS) {
        driver_lock();
        *flags = driver.dev[dev].ctx.flags;
        *active = driver.dev[dev].ctx.refs > 0;
        driver_unlock();
    }
    return driver_leave(SYM_cuDevicePrimaryCtxGetState, r, "(%d)", dev);
}

/* CU_CTX_SCHED_* is 0, 1, 2 or 4 in the low bits; the other defined
 * flags (MAP_HOST .. SYNC_MEMOPS) are bits 3..7. */
static int bad_ctx_flags(unsigned int flags)
{
    unsigned int sched = flags & 0x7;
    return (flags & ~0xffu) != 0 || sched == 3 || sched > 4;
}

static CUresult ctx_set_flags(CUdevice dev, unsigned int flags)
{
    CUresult r = driver_check_device_args(dev, bad_ctx_flags(flags));
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    driver.dev[dev].ctx.flags = flags;
    driver_unlock();
    return CUDA_SUCCESS;
}

DRIVER_CALL(cuDevicePrimaryCtxSetFlags_v2, (CUdevice dev, unsigned int flags),
            ctx_set_flags(dev, flags), "(%d, 0x%x)", dev, flags)
DRIVER_CALL(cuDevicePrimaryCtxSetFlags, (CUdevice dev, unsigned int flags),
            ctx_set_flags(dev, flags), "(%d, 0x%x)", dev, flags)

/* ---- the current context ---- */

/* Whether ctx is one of the sim's contexts (any value may come in). */
static int known_context(CUcontext ctx)
{
    for (int d = 0; d < driver.ndevices; d++)
        if (ctx == &driver.dev[d].ctx)
            return 1;
    for (struct CUctx_st *c = driver.created; c != NULL; c = c->next)
        if (ctx == c)
            return 1;
    return 0;
}

/* ---- created contexts ----
 * The sim has no context stack: cuCtxCreate makes the new context current
 * (NVIDIA pushes it), and cuCtxDestroy of the current context leaves none
 * current (NVIDIA pops to the one below).  Execution-affinity and CIG
 * parameters are not simulated: CUDA_ERROR_NOT_SUPPORTED. */

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r = driver_check_device_args(dev, pctx == NULL || bad_ctx_flags(flags));
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c = calloc(1, sizeof *c);
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->device = dev;
    c->refs = 1;
    c->flags = flags;
    c->created = 1;
    driver_lock();
    c->next = driver.created;
    driver.created = c;
    driver_charge_reserved(dev);
    driver_unlock();
    current_ctx = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

DRIVER_CALL(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev),
            ctx_create(pctx, flags, dev), "(0x%x, %d)", flags, dev)

DRIVER_CALL(cuCtxCreate_v3,
            (CUcontext *pctx, struct CUexecAffinityParam_st *paramsArray, int numParams,
             unsigned int flags, CUdevice dev),
            paramsArray != NULL || numParams != 0 ? CUDA_ERROR_NOT_SUPPORTED
                                                  : ctx_create(pctx, flags, dev),
            "(%d params, 0x%x, %d)", numParams, flags, dev)
DRIVER_CALL(cuCtxCreate_v4,
            (CUcontext *pctx, struct CUctxCreateParams_st *ctxCreateParams, unsigned int flags,
             CUdevice dev),
            ctxCreateParams != NULL ? CUDA_ERROR_NOT_SUPPORTED : ctx_create(pctx, flags, dev),
            "(0x%x, %d)", flags, dev)

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    DRIVER_ENTER(cuCtxDestroy_v2);
    CUresult r = driver_ready_args(ctx == NULL);
    if (r == CUDA_SUCCESS) {
        driver_lock();
        if (!known_context(ctx) || !ctx->created || ctx->refs == 0) {
            r = CUDA_ERROR_INVALID_CONTEXT; /* primary contexts are released, not destroyed */
        } else {
            ctx->refs = 0;
            driver_memory_free_context(ctx);
        }
        driver_unlock();
    }
    if (r == CUDA_SUCCESS && current_ctx == ctx)
        current_ctx = NULL;
    return driver_leave(SYM_cuCtxDestroy_v2, r, "(%p)", (void *)ctx);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    DRIVER_ENTER(cuCtxGetCurrent);
    CUresult r = driver_ready_args(pctx == NULL);
    if (r == CUDA_SUCCESS)
        *pctx = current_ctx;
    return driver_leave(SYM_cuCtxGetCurrent, r, "() -> %p", (void *)current_ctx);
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    DRIVER_ENTER(cuCtxSetCurrent);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && ctx != NULL) {
        driver_lock();
        if (!known_context(ctx) || ctx->refs == 0)
            r = CUDA_ERROR_INVALID_CONTEXT;
        driver_unlock();
    }
    if (r == CUDA_SUCCESS)
        current_ctx = ctx;
    return driver_leave(SYM_cuCtxSetCurrent, r, "(%p)", (void *)ctx);
}

/* The context stack of the calling thread, as the driver's: push saves the
 * current context and makes ctx current, pop hands back the current one and
 * makes the saved one current again (none when the stack is empty).  Deeper
 * than STACK_MAX, push answers CUDA_ERROR_OUT_OF_MEMORY. */
enum { STACK_MAX = 16 };
static _Thread_local struct CUctx_st *ctx_stack[STACK_MAX];
static _Thread_local int ctx_depth;

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    DRIVER_ENTER(cuCtxPushCurrent_v2);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS) {
        driver_lock();
        if (ctx == NULL || !known_context(ctx) || ctx->refs == 0)
            r = CUDA_ERROR_INVALID_CONTEXT;
        driver_unlock();
    }
    if (r == CUDA_SUCCESS && ctx_depth == STACK_MAX)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        ctx_stack[ctx_depth++] = current_ctx;
        current_ctx = ctx;
    }
    return driver_leave(SYM_cuCtxPushCurrent_v2, r, "(%p)", (void *)ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    DRIVER_ENTER(cuCtxPopCurrent_v2);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && current_ctx == NULL)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        if (pctx != NULL)
            *pctx = current_ctx;
        current_ctx = ctx_depth > 0 ? ctx_stack[--ctx_depth] : NULL;
    }
    return driver_leave(SYM_cuCtxPopCurrent_v2, r, "()");
}

/* The device of ctx, or of the current context when ctx is NULL. */
static CUresult ctx_device(CUcontext ctx, int *dev)
{
    CUresult r = driver_ready();
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    if (ctx == NULL)
        r = driver_current_device(dev);
    else if (!known_context(ctx) || ctx->refs == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else {
        *dev = ctx->device;
        r = CUDA_SUCCESS;
    }
    driver_unlock();
    return r;
}

/* cuCtxGetDevice*: *device is left as it was on failure. */
static CUresult get_device(CUdevice *device, CUcontext ctx)
{
    CUresult r = driver_ready_args(device == NULL);
    return r == CUDA_SUCCESS ? ctx_device(ctx, device) : r;
}

/* Work completes when it is issued: synchronising only checks the context. */
static CUresult synchronize(CUcontext ctx)
{
    int dev;
    return ctx_device(ctx, &dev);
}

DRIVER_CALL(cuCtxGetDevice, (CUdevice *device), get_device(device, NULL), "() -> %d",
            r == CUDA_SUCCESS ? *device : -1)
DRIVER_CALL(cuCtxGetDevice_v2, (CUdevice *device, CUcontext ctx), get_device(device, ctx),
            "(%p) -> %d", (void *)ctx, r == CUDA_SUCCESS ? *device : -1)
DRIVER_CALL(cuCtxSynchronize, (void), synchronize(NULL), "()")
DRIVER_CALL(cuCtxSynchronize_v2, (CUcontext ctx), synchronize(ctx), "(%p)", (void *)ctx)
