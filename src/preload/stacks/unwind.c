/* unwind.c - native call stacks.
 *
 * Two ways, no third: the frame-rule walk below for every stack it can
 * take, glibc's backtrace() (libgcc_s's DWARF unwinder) for the rest.
 * backtrace() keeps no per-thread state (libgcc finds each FDE with
 * glibc's lock-free _dl_find_object), and libgcc_s is the unwinder the
 * host's own C++ exceptions use, so nothing in the host's global scope
 * changes.  It costs far more a stack than the walk, which takes every
 * stack of the PyTorch runs measured (docs/performance.md "native
 * stacks").
 *
 * The common path (x86-64): a walk by frame rules.  Each
 * return address's rule - where the CFA is, whether and where the caller's
 * rbp is saved - comes from the module's .eh_frame, read once and cached
 * (cfi.c), so the walk follows the very rules a DWARF unwinder would, frame
 * pointers or not, at a hash probe and two loads a frame.  It never reads
 * outside the calling thread's stack: every CFA must rise strictly, stay
 * 8-aligned and below the stack's top, and the two reads of a frame lie
 * between the previous CFA and the new one.  The top: the page holding
 * glibc's __libc_stack_end for the main thread; for other threads the
 * thread descriptor, which glibc (nptl allocatestack.c) places above the
 * stack in the same mapping, user-supplied stacks included; a stack
 * pointer more than MAX_STACK below either (a signal's alternate stack, a
 * coroutine's) has no known top, and the walk is not tried.  Any frame
 * without a plain rule (a signal frame, a DWARF expression, no FDE) hands
 * the whole stack to backtrace(); so does a walk that leaves the bounds.
 * Both report the same return addresses (tests/unit/test_unwind.c).
 */
#include "unwind.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cfi.h"
#include "record.h"
#include "resolve.h"

static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

/* [stop_lo, stop_lo + stop_span): see unwind_stop_at. */
static uintptr_t stop_lo, stop_span;

void unwind_stop_at(uintptr_t lo, uintptr_t hi)
{
    __atomic_store_n(&stop_lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&stop_span, hi > lo ? hi - lo : 0, __ATOMIC_RELAXED);
}

/* How many of frames[0..n) to keep: up to the first stop address. */
static unsigned stop_cut(void *const *frames, unsigned n)
{
    uintptr_t lo = __atomic_load_n(&stop_lo, __ATOMIC_RELAXED);
    uintptr_t span = __atomic_load_n(&stop_span, __ATOMIC_RELAXED);
    for (unsigned i = 0; span != 0 && i < n; i++)
        if ((uintptr_t)frames[i] - 1 - lo < span) /* inside the call */
            return i + 1;
    return n;
}

/* True if `addr` lies in this library's own code. */
static int unwind_is_ours(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    return a >= self_lo && a < self_hi;
}

/* ---- the frame-rule walk ---- */

#if defined(__x86_64__)
#define MAX_STACK ((uintptr_t)64 << 20) /* beyond any thread's stack here */
static bool walk_ok;                 /* cfi_init found _dl_find_object */
static uintptr_t main_top;           /* page end of __libc_stack_end */
static __thread uintptr_t stack_top __attribute__((tls_model("initial-exec")));

/* The top of the stack `sp` lies on (see above), or 0 when unknown. */
static uintptr_t top_of(uintptr_t sp)
{
    uintptr_t top = stack_top;
    if (__builtin_expect(top > sp && top - sp <= MAX_STACK, 1))
        return top;
    if (main_top > sp && main_top - sp <= MAX_STACK)
        top = main_top;
    else if ((uintptr_t)pthread_self() > sp && (uintptr_t)pthread_self() - sp <= MAX_STACK)
        top = (uintptr_t)pthread_self();
    else
        return 0;
    stack_top = top;
    return top;
}

/* Walks from the frame whose caller resumes at `pc` with stack pointer
 * `sp` and rbp `rbp`, storing up to `max` return addresses.  Returns how
 * many, or -1 when the stack needs backtrace().  Every read lies in [sp, top):
 * the walk reads other frames of this thread's stack by design, so the
 * sanitizer's redzone checks do not apply to it. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#if !defined(NO_ASAN) && defined(__SANITIZE_ADDRESS__)
#define NO_ASAN __attribute__((no_sanitize_address))
#endif
#ifndef NO_ASAN
#define NO_ASAN
#endif

/* The walk; with `stop`, it ends at the first return address in
 * [lo, lo + span) (unwind_stop_at).  Inlined twice, so that a process
 * without a stop pays nothing for it. */
static inline __attribute__((always_inline)) int
walk_rules(bool stop, uintptr_t lo, uintptr_t span, void **out, unsigned max,
           uintptr_t pc, uintptr_t sp, uintptr_t rbp, uintptr_t top)
{
    unsigned n = 0;
    while (n < max) {
        uint64_t e = cfi_entry(pc);
        uintptr_t off = CFI_CFA_OFF(e);
        out[n++] = (void *)pc;
        if (stop && pc - 1 - lo < span) /* inside the call */
            return (int)n;
        if (__builtin_expect(off == 0, 0))
            /* the outermost frame (backtrace() stops there too), or no rule */
            return (e & CFI_LAST) ? (int)n : -1;
        uintptr_t cfa = ((e & CFI_RBP) ? rbp : sp) + off;
        if (cfa - sp - 1 >= top - sp || (cfa & 7)) /* sp < cfa <= top, aligned */
            return -1;
        pc = *(const uintptr_t *)(cfa - 8);
        uintptr_t slot = CFI_RBP_SLOT(e);
        if (slot != 0) {
            if (slot > cfa - sp)
                return -1;
            rbp = *(const uintptr_t *)(cfa - slot);
        }
        sp = cfa;
        if (pc == 0)
            return (int)n;
    }
    return (int)n;
}

NO_ASAN int unwind_walk(void **out, unsigned max, uintptr_t pc, uintptr_t sp,
                        uintptr_t rbp, uintptr_t top)
{
    uintptr_t lo = __atomic_load_n(&stop_lo, __ATOMIC_RELAXED);
    uintptr_t span = __atomic_load_n(&stop_span, __ATOMIC_RELAXED);
    if (span != 0)
        return walk_rules(true, lo, span, out, max, pc, sp, rbp, top);
    return walk_rules(false, 0, 0, out, max, pc, sp, rbp, top);
}

/* The walk from our caller: this function keeps a frame pointer (GCC and
 * clang set one up where __builtin_frame_address(0) is used). */
static __attribute__((noinline)) int walk_here(void **out, unsigned max)
{
    uintptr_t fa = (uintptr_t)__builtin_frame_address(0);
    uintptr_t top = top_of(fa);
    if (top == 0 || top - fa < 16)
        return -1;
    return unwind_walk(out, max, (uintptr_t)__builtin_return_address(0), fa + 16,
                       *(const uintptr_t *)fa, top);
}
#else
int unwind_walk(void **out, unsigned max, uintptr_t pc, uintptr_t sp,
                uintptr_t rbp, uintptr_t top)
{
    (void)out, (void)max, (void)pc, (void)sp, (void)rbp, (void)top;
    return -1;
}
#endif

void unwind_init(void)
{
    dl_iterate_phdr(find_self, (void *)(uintptr_t)unwind_capture);
#if defined(__x86_64__)
    void **stack_end = resolve_dlsym(RTLD_DEFAULT, "__libc_stack_end");
    if (stack_end != NULL && *stack_end != NULL)
        main_top = ((uintptr_t)*stack_end | 4095) + 1;
    walk_ok = cfi_init();
#endif
    void *warm[RECORD_MAX_DEPTH];
    backtrace(warm, RECORD_MAX_DEPTH); /* loads libgcc_s now, not in a hook */
}

unsigned unwind_capture(void **frames, unsigned max, const void *from)
{
    if (max > RECORD_MAX_DEPTH)
        max = RECORD_MAX_DEPTH;
#if defined(__x86_64__)
    /* From the wrapper's caller: none of our frames to walk or drop. */
    if (__builtin_expect(walk_ok && from != NULL, 1)) {
        uintptr_t fa = (uintptr_t)from, top = top_of(fa);
        const uintptr_t *rec = from; /* saved rbp, return address */
        int n = top != 0 && top - fa >= 16 && !(fa & 7)
                    ? unwind_walk(frames, max, rec[1], fa + 16, rec[0], top)
                    : -1;
        if (n > 0 && !unwind_is_ours(frames[0]))
            return (unsigned)n;
    }
#else
    (void)from;
#endif
    /* Our own frames (this function, the hook helper, the wrapper) come
     * first and are dropped.  backtrace() pays a DWARF step a frame, so we ask
     * for just as many extra as we have seen of our own: 8 the first time,
     * then the largest count seen plus one. */
    enum { FIRST_SLACK = 8 };
    static unsigned slack;
    void *buf[RECORD_MAX_DEPTH + 32];
    unsigned want = __atomic_load_n(&slack, __ATOMIC_RELAXED);
    if (want == 0)
        want = FIRST_SLACK;
    int n = -1;
#if defined(__x86_64__)
    if (__builtin_expect(walk_ok, 1))
        n = walk_here(buf, max + want);
#endif
    if (n < 0)
        n = backtrace(buf, (int)(max + want));
    /* A sanitizer's backtrace() interceptor may put its own frames first:
     * start at our first frame when there is one among the first few. */
    int skip = 0;
    while (skip < n && skip < 8 && !unwind_is_ours(buf[skip]))
        skip++;
    if (skip == n || skip == 8)
        skip = 0;
    while (skip < n && unwind_is_ours(buf[skip]))
        skip++;
    if ((unsigned)skip + 1 > __atomic_load_n(&slack, __ATOMIC_RELAXED) && skip < 31)
        __atomic_store_n(&slack, (unsigned)skip + 1, __ATOMIC_RELAXED);
    unsigned depth = (unsigned)(n - skip);
    if (depth > max)
        depth = max;
    depth = stop_cut(buf + skip, depth); /* where the frame-rule walk stops */
    memcpy(frames, buf + skip, depth * sizeof(void *));
    return depth;
}
