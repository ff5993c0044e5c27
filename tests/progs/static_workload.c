/* static_workload.c - rt_workload.c linked with the static runtime
 * (libcudart_static.a), nvcc's default: nothing interposes on cudaMalloc
 * here, so cumemtrace must see the driver calls the runtime makes through
 * the cuGetProcAddress it obtained with dlsym. */
#include "rt_workload.c"
