/* alloc.cu - a host-only program built by nvcc against NVIDIA's real CUDA
 * runtime (once with -cudart shared, once with -cudart static).
 *
 * tests/e2e/test_nvidia_runtime.py runs it under LD_PRELOAD=libcumemtrace.so
 * with our simulated libcuda.so.1 on the library path, to show that NVIDIA's
 * own runtime code obtains our wrappers when it resolves the driver
 * (dlsym "cuGetProcAddress_v2", then cuGetProcAddress for each function).
 * The real runtime cannot initialise on the simulated driver (it needs
 * undocumented export tables), so the calls below are expected to fail: the
 * program only prints each result and which CUDA libraries it loaded, and
 * always exits 0 unless something crashed.
 */
#include <cuda_runtime_api.h>

#include <link.h>
#include <stdio.h>
#include <string.h>

static void report(const char *what, cudaError_t e)
{
    printf("%s = %d (%s)\n", what, (int)e, cudaGetErrorName(e));
    fflush(stdout);
}

/* Prints "<when>: loaded <path>" for every loaded libcuda* object
 * (libcuda.so.1, libcudart.so.13), so the test can check that NVIDIA's
 * runtime, not the simulated one, is in use. */
static int print_cuda_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libcuda", 7) == 0)
        printf("%s: loaded %s\n", (const char *)data, info->dlpi_name);
    return 0;
}

static void print_cuda_objects(const char *when)
{
    dl_iterate_phdr(print_cuda_object, (void *)when);
    fflush(stdout);
}

int main(void)
{
    print_cuda_objects("start");
    int version = 0;
    cudaError_t e = cudaRuntimeGetVersion(&version);
    printf("runtime version %d\n", version);
    fflush(stdout);
    report("cudaRuntimeGetVersion", e);

    void *dev = NULL;
    report("cudaMalloc", cudaMalloc(&dev, 1 << 20));
    void *host = NULL;
    report("cudaMallocHost", cudaMallocHost(&host, 1 << 16));
    void *async = NULL;
    report("cudaMallocAsync", cudaMallocAsync(&async, 1 << 20, 0));

    if (async != NULL)
        report("cudaFreeAsync", cudaFreeAsync(async, 0));
    if (host != NULL)
        report("cudaFreeHost", cudaFreeHost(host));
    if (dev != NULL)
        report("cudaFree", cudaFree(dev));

    print_cuda_objects("end");
    printf("done\n");
    return 0;
}
