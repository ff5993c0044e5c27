/* probe.cpp - prints the layout and values of every type, enumerator and
 * #define in our cuda_types.h / cuda_api.h, one fact per line.
 *
 * check_abi.py builds it twice - with NVIDIA's headers (ABI_OFFICIAL) and
 * with ours - and diffs the two outputs.  The list of names (abi_list.h) is
 * generated from our headers, so nothing we declare is left out.  C++ only
 * for typeid: its (mangled) name spells a type exactly - signedness and width
 * of integers, enum and struct tags, pointer targets, array bounds - and is
 * the same for C and C++ on this ABI.
 */
#ifdef ABI_OFFICIAL
/* NVIDIA's own macro: also declares CUdeviceptr_v1 and the other pre-3.2
 * types that we declare for the old entry points. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#else
#include "cuda_api.h"
#endif

#include <cstddef>
#include <cstdio>
#include <type_traits>
#include <typeinfo>

template <typename T> static void type_line(const char *label)
{
    std::printf("type %s: size %zu align %zu %s", label, sizeof(T), alignof(T),
                typeid(T).name());
    if constexpr (std::is_enum<T>::value)
        std::printf(" underlying %s", typeid(std::underlying_type_t<T>).name());
    std::printf("\n");
}

#define ABI_TYPE(label, ...) type_line<__VA_ARGS__>(label);
#define ABI_RECORD(label, ...)                                               \
    std::printf("record %s: size %zu align %zu\n", label, sizeof(__VA_ARGS__), \
                alignof(__VA_ARGS__));
#define ABI_FIELD(label, T, m)                                               \
    std::printf("field %s.%s: offset %zu size %zu %s\n", label, #m,          \
                offsetof(T, m), sizeof(((T *)0)->m),                         \
                typeid(decltype(((T *)0)->m)).name());
#define ABI_ENUMERATOR(n)                                                    \
    std::printf("enumerator %s = %lld %s\n", #n, (long long)(n),             \
                typeid(n).name());
/* A value only: NVIDIA declares some of these as enumerators. */
#define ABI_DEFINE(n) std::printf("define %s = %lld\n", #n, (long long)(n));

int main()
{
#include "abi_list.h"
    return 0;
}
