/* nvtx.c - cumemtrace as an NVTX 3 tool: the program's NVTX ranges become
 * phases (phases.h).
 *
 * The protocol, from NVIDIA's header-only NVTX 3 (CUDA toolkit,
 * include/nvtx3/nvtxDetail/nvtxInit.h, nvtxImpl.h, nvtxTypes.h): at a
 * program's first NVTX call, the NVTX code compiled into it reads
 * NVTX_INJECTION64_PATH, dlopens that library and calls its exported
 * `int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t)`.  The tool asks
 * that function for export table 1 (callbacks), whose
 * GetModuleFunctionTable(module, &table, &size) hands out, per module
 * (1 core, 5 core2: domains), an array of pointers to the program's
 * function-pointer slots indexed by callback id (valid ids 1..size-1;
 * index 0 and unlisted ids are NULL); the tool writes its functions into
 * the slots it implements, and NVTX makes the others no-ops.  Returning 0
 * makes NVTX unload the tool and turn everything into no-ops.  Table 3
 * (version info) carries SetInjectionNvtxVersion, which a tool calls.
 *
 * Why inside libcumemtrace.so (not a library of its own): a path set in
 * NVTX_INJECTION64_PATH to the preloaded library makes dlopen return the
 * instance already loaded, so the ranges land in the same tracker with no
 * second library, no lookup between the two and nothing more to install;
 * the cost is one more exported name (exports.map.in).  Each copy of NVTX in
 * the process (a program and each library built with the header) calls
 * the function once; they all feed the same stacks.
 *
 * Handled: push/pop, start/end (also across threads), marks, domains,
 * registered strings, ASCII and wide names.  Ignored (NVTX's no-ops):
 * categories, thread and resource names, payloads, colours, the CUDA,
 * OpenCL and sync modules.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

#include "phases.h"

/* ---- the ABI, as nvtxTypes.h and nvToolsExt.h lay it out ---- */

typedef void (*nvtx_fn)(void);
typedef const void *(*get_export_table_fn)(uint32_t id);

struct callbacks_table { /* NvtxExportTableCallbacks, id 1 */
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_fn ***out_table,
                                     unsigned int *out_size);
};
struct version_table { /* NvtxExportTableVersionInfo, id 3 */
    size_t struct_size;
    uint32_t version, reserved0;
    void (*set_injection_version)(uint32_t version);
};

enum { ETID_CALLBACKS = 1, ETID_VERSIONINFO = 3 };
enum { MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum {
    CORE_MarkEx = 1, CORE_MarkA, CORE_MarkW, CORE_RangeStartEx, CORE_RangeStartA,
    CORE_RangeStartW, CORE_RangeEnd, CORE_RangePushEx, CORE_RangePushA, CORE_RangePushW,
    CORE_RangePop
};
enum {
    CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx, CORE2_DomainRangeEnd,
    CORE2_DomainRangePushEx, CORE2_DomainRangePop, CORE2_DomainRegisterStringA = 10,
    CORE2_DomainRegisterStringW, CORE2_DomainCreateA, CORE2_DomainCreateW,
    CORE2_DomainDestroy, CORE2_Initialize
};
enum { MESSAGE_ASCII = 1, MESSAGE_UNICODE = 2, MESSAGE_REGISTERED = 3 };

/* nvtxEventAttributes_v2 */
struct event_attributes {
    uint16_t version, size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type, reserved0;
    uint64_t payload;
    int32_t message_type;
    union {
        const char *ascii;
        const wchar_t *unicode;
        const struct phase_name *registered;
    } message;
};
_Static_assert(offsetof(struct event_attributes, message) == 40 &&
                   sizeof(struct event_attributes) == 48,
               "nvtxEventAttributes_v2 layout");

/* NVTX 3, the version this tool was written against. */
#define NVTX_VERSION_SUPPORTED 3

static struct phase_domain *nvtx_default;

/* ---- names ---- */

/* A wide name (UTF-32 on Linux) as UTF-8, cut to buf's size. */
static size_t utf8_of_wide(const wchar_t *w, char *buf, size_t cap)
{
    size_t n = 0;
    for (; w != NULL && *w != 0; w++) {
        uint32_t c = (uint32_t)*w;
        char t[4];
        size_t k;
        if (c < 0x80) {
            t[0] = (char)c, k = 1;
        } else if (c < 0x800) {
            t[0] = (char)(0xC0 | c >> 6), t[1] = (char)(0x80 | (c & 63)), k = 2;
        } else if (c < 0x10000) {
            if (c >= 0xD800 && c < 0xE000)
                c = 0xFFFD;
            t[0] = (char)(0xE0 | c >> 12), t[1] = (char)(0x80 | (c >> 6 & 63));
            t[2] = (char)(0x80 | (c & 63)), k = 3;
        } else if (c < 0x110000) {
            t[0] = (char)(0xF0 | c >> 18), t[1] = (char)(0x80 | (c >> 12 & 63));
            t[2] = (char)(0x80 | (c >> 6 & 63)), t[3] = (char)(0x80 | (c & 63)), k = 4;
        } else {
            t[0] = (char)0xEF, t[1] = (char)0xBF, t[2] = (char)0xBD, k = 3;
        }
        if (n + k > cap)
            break;
        memcpy(buf + n, t, k);
        n += k;
    }
    return n;
}

/* The name an event carries, into (*s, *len); buf holds a converted one. */
static void name_of(const struct event_attributes *a, char *buf, const char **s, size_t *len)
{
    *s = "";
    *len = 0;
    if (a == NULL || a->size < sizeof *a)
        return;
    switch (a->message_type) {
    case MESSAGE_ASCII:
        if (a->message.ascii != NULL) {
            *s = a->message.ascii;
            *len = strlen(*s);
        }
        break;
    case MESSAGE_UNICODE:
        *len = utf8_of_wide(a->message.unicode, buf, PHASE_NAME_MAX);
        *s = buf;
        break;
    case MESSAGE_REGISTERED:
        if (a->message.registered != NULL) {
            *s = a->message.registered->s;
            *len = a->message.registered->len;
        }
        break;
    default:
        break;
    }
}

static struct phase_domain *domain_or_default(void *domain)
{
    return domain != NULL ? (struct phase_domain *)domain : nvtx_default;
}

/* ---- the callbacks ---- */

static int range_push_a(const char *message)
{
    return phase_push_str(nvtx_default, message);
}

static int range_push_w(const wchar_t *message)
{
    char buf[PHASE_NAME_MAX + 1];
    return phase_push(nvtx_default, buf, utf8_of_wide(message, buf, PHASE_NAME_MAX));
}

static int domain_range_push_ex(void *domain, const struct event_attributes *a)
{
    char buf[PHASE_NAME_MAX + 1];
    const char *s;
    size_t len;
    name_of(a, buf, &s, &len);
    return phase_push(domain_or_default(domain), s, len);
}

static int range_push_ex(const struct event_attributes *a)
{
    return domain_range_push_ex(NULL, a);
}

static int domain_range_pop(void *domain)
{
    return phase_pop(domain_or_default(domain));
}

static int range_pop(void)
{
    return phase_pop(nvtx_default);
}

static uint64_t range_start_a(const char *message)
{
    return phase_start(nvtx_default, message, message ? strlen(message) : 0);
}

static uint64_t range_start_w(const wchar_t *message)
{
    char buf[PHASE_NAME_MAX + 1];
    return phase_start(nvtx_default, buf, utf8_of_wide(message, buf, PHASE_NAME_MAX));
}

static uint64_t domain_range_start_ex(void *domain, const struct event_attributes *a)
{
    char buf[PHASE_NAME_MAX + 1];
    const char *s;
    size_t len;
    name_of(a, buf, &s, &len);
    return phase_start(domain_or_default(domain), s, len);
}

static uint64_t range_start_ex(const struct event_attributes *a)
{
    return domain_range_start_ex(NULL, a);
}

static void range_end(uint64_t id)
{
    phase_end(id);
}

static void domain_range_end(void *domain, uint64_t id)
{
    (void)domain; /* the id names the range */
    phase_end(id);
}

static void mark_a(const char *message)
{
    phase_mark(nvtx_default, message, message ? strlen(message) : 0);
}

static void mark_w(const wchar_t *message)
{
    char buf[PHASE_NAME_MAX + 1];
    phase_mark(nvtx_default, buf, utf8_of_wide(message, buf, PHASE_NAME_MAX));
}

static void domain_mark_ex(void *domain, const struct event_attributes *a)
{
    char buf[PHASE_NAME_MAX + 1];
    const char *s;
    size_t len;
    name_of(a, buf, &s, &len);
    phase_mark(domain_or_default(domain), s, len);
}

static void mark_ex(const struct event_attributes *a)
{
    domain_mark_ex(NULL, a);
}

static void *domain_create_a(const char *name)
{
    return phase_domain("nvtx", name);
}

static void *domain_create_w(const wchar_t *name)
{
    char buf[PHASE_NAME_MAX + 1];
    buf[utf8_of_wide(name, buf, PHASE_NAME_MAX)] = '\0';
    return phase_domain("nvtx", buf);
}

static void domain_destroy(void *domain)
{
    (void)domain; /* kept: its phases stay named in the snapshot */
}

static const void *register_string_a(void *domain, const char *s)
{
    (void)domain;
    return phase_intern_name(s, s ? strlen(s) : 0);
}

static const void *register_string_w(void *domain, const wchar_t *s)
{
    char buf[PHASE_NAME_MAX + 1];
    (void)domain;
    return phase_intern_name(buf, utf8_of_wide(s, buf, PHASE_NAME_MAX));
}

static void initialize(const void *reserved)
{
    (void)reserved;
}

/* ---- attaching ---- */

struct slot_fn {
    unsigned id;
    nvtx_fn fn;
};

/* Writes fns into the module's slots; false when NVTX has no such module. */
static int attach(const struct callbacks_table *cb, int module, const struct slot_fn *fns,
                  size_t n)
{
    nvtx_fn **table = NULL;
    unsigned size = 0;
    if (!cb->get_module_function_table(module, &table, &size) || table == NULL)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (fns[i].id < size && table[fns[i].id] != NULL)
            *table[fns[i].id] = fns[i].fn;
    return 1;
}

#define FN(f) ((nvtx_fn)(void (*)(void))(f))

/* Exported (exports.map.in): what NVTX looks up in the library it loads. */
int InitializeInjectionNvtx2(get_export_table_fn get_export_table);

__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(get_export_table_fn get_export_table)
{
    if (get_export_table == NULL)
        return 0;
    const struct callbacks_table *cb = get_export_table(ETID_CALLBACKS);
    if (cb == NULL || cb->struct_size < sizeof *cb || cb->get_module_function_table == NULL)
        return 0;
    const struct version_table *vt = get_export_table(ETID_VERSIONINFO);
    if (vt != NULL && vt->struct_size >= sizeof *vt && vt->set_injection_version != NULL)
        vt->set_injection_version(NVTX_VERSION_SUPPORTED);
    if (__atomic_load_n(&nvtx_default, __ATOMIC_ACQUIRE) == NULL)
        __atomic_store_n(&nvtx_default, phase_domain("nvtx", NULL), __ATOMIC_RELEASE);

    static const struct slot_fn core[] = {
        {CORE_MarkEx, FN(mark_ex)},
        {CORE_MarkA, FN(mark_a)},
        {CORE_MarkW, FN(mark_w)},
        {CORE_RangeStartEx, FN(range_start_ex)},
        {CORE_RangeStartA, FN(range_start_a)},
        {CORE_RangeStartW, FN(range_start_w)},
        {CORE_RangeEnd, FN(range_end)},
        {CORE_RangePushEx, FN(range_push_ex)},
        {CORE_RangePushA, FN(range_push_a)},
        {CORE_RangePushW, FN(range_push_w)},
        {CORE_RangePop, FN(range_pop)},
    };
    static const struct slot_fn core2[] = {
        {CORE2_DomainMarkEx, FN(domain_mark_ex)},
        {CORE2_DomainRangeStartEx, FN(domain_range_start_ex)},
        {CORE2_DomainRangeEnd, FN(domain_range_end)},
        {CORE2_DomainRangePushEx, FN(domain_range_push_ex)},
        {CORE2_DomainRangePop, FN(domain_range_pop)},
        {CORE2_DomainRegisterStringA, FN(register_string_a)},
        {CORE2_DomainRegisterStringW, FN(register_string_w)},
        {CORE2_DomainCreateA, FN(domain_create_a)},
        {CORE2_DomainCreateW, FN(domain_create_w)},
        {CORE2_DomainDestroy, FN(domain_destroy)},
        {CORE2_Initialize, FN(initialize)},
    };
    if (!attach(cb, MODULE_CORE, core, sizeof core / sizeof core[0]))
        return 0;
    attach(cb, MODULE_CORE2, core2, sizeof core2 / sizeof core2[0]);
    return 1;
}
