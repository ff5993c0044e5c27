// libthrow.cpp - C++ code a C host loads with dlopen, like python3 loading
// libtorch: throws and catches an exception.  If a preloaded library dragged
// libunwind.so.8 into the global scope, libstdc++ would bind
// _Unwind_RaiseException to it instead of libgcc_s (docs/design.md, "Facts").
#include <stdexcept>

extern "C" int throw_and_catch(void)
{
    try {
        throw std::runtime_error("expected");
    } catch (const std::exception &) {
        return 42;
    }
    return 0;
}
