/* test_sim_kernels.c - what the simulated runtime adds for PyTorch:
 * device properties (CUDA 13 layout) and attributes, nvcc's registration
 * and launches, function attributes, streams and events, copies (device
 * memory reads as zeros), pool attributes through the runtime, the refused
 * graph and IPC calls, and the simulated NVML. */
#include <dlfcn.h>

#include "sim_test.h"

/* nvcc's registration entry points (crt/host_runtime.h, not in cuda_api.h). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, void *tid, void *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);

/* Keeps libcuda.so.1 a dependency under --as-needed: the runtime dlopen()s
 * it by soname, as NVIDIA's does, and finds the loaded one. */
void *volatile sim_test_keep_libcuda = (void *)cuInit;

static void stub_kernel(void) {}
static void unregistered(void) {}

static void properties_body(void)
{
    struct cudaDeviceProp p;
    memset(&p, 0xff, sizeof p);
    SIM_CHECK_RT(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    SIM_CHECK_EQ(p.major, 9);
    SIM_CHECK_EQ(p.minor, 0);
    SIM_CHECK_EQ(p.multiProcessorCount, 132);
    SIM_CHECK_EQ(p.totalGlobalMem, 24 * GiB); /* SIMCUDA_MEMORY */
    SIM_CHECK_EQ(p.warpSize, 32);
    SIM_CHECK_EQ(p.maxThreadsDim[2], 64);
    SIM_CHECK_EQ(p.memoryPoolsSupported, 1);
    SIM_CHECK_EQ(p.reserved[55], 0); /* the tail of the struct is zeroed */
    SIM_CHECK(strstr(p.name, "simulated") != NULL);
    int v = -1;
    SIM_CHECK_RT(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
    SIM_CHECK_EQ(v, 9);
    SIM_CHECK_RT(cudaDeviceGetAttribute(&v, (enum cudaDeviceAttr)120, 0), cudaSuccess);
    SIM_CHECK_EQ(v, 1); /* cluster launch: a value for every attribute number */
    SIM_CHECK_RT(cudaDeviceGetAttribute(&v, (enum cudaDeviceAttr)9999, 0),
                 cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaGetDeviceProperties(&p, 1), cudaErrorInvalidDevice);
    char bus[32];
    SIM_CHECK_RT(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), cudaSuccess);
    SIM_CHECK(strcmp(bus, "0000:18:00.0") == 0);
    int least = 1, greatest = 1;
    SIM_CHECK_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    SIM_CHECK(least == 0 && greatest < 0);
}
SIM_TEST(properties, properties_body, "SIMCUDA_MEMORY=24GiB")

static void launches_body(void)
{
    static int fatbin;
    void **h = __cudaRegisterFatBinary(&fatbin);
    __cudaRegisterFunction(h, (const char *)(void *)stub_kernel, NULL, "_Z6kernelv", -1, NULL,
                           NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(h);
    dim3 grid = {4, 1, 1}, block = {256, 1, 1}, bad = {2048, 1, 1};
    SIM_CHECK_RT(cudaLaunchKernel((const void *)stub_kernel, grid, block, NULL, 0, NULL),
                 cudaSuccess);
    SIM_CHECK_RT(cudaLaunchKernel((const void *)stub_kernel, grid, bad, NULL, 0, NULL),
                 cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaLaunchKernel((const void *)unregistered, grid, block, NULL, 0, NULL),
                 cudaErrorInvalidDeviceFunction);
    cudaKernel_t k = NULL;
    SIM_CHECK_RT(__cudaGetKernel(&k, (const void *)stub_kernel), cudaSuccess);
    SIM_CHECK_RT(__cudaLaunchKernel(k, grid, block, NULL, 0, NULL), cudaSuccess);
    SIM_CHECK_RT(__cudaGetKernel(&k, (const void *)unregistered),
                 cudaErrorInvalidDeviceFunction);
    /* <<<grid, block, 0, s>>>: push, then the stub pops. */
    cudaStream_t s = (cudaStream_t)(uintptr_t)0x2;
    SIM_CHECK_EQ(__cudaPushCallConfiguration(grid, block, 128, s), 0);
    dim3 g2, b2;
    size_t shm = 0;
    cudaStream_t s2 = NULL;
    SIM_CHECK_RT(__cudaPopCallConfiguration(&g2, &b2, &shm, &s2), cudaSuccess);
    SIM_CHECK(g2.x == 4 && b2.x == 256 && shm == 128 && s2 == s);
    SIM_CHECK_RT(__cudaPopCallConfiguration(&g2, &b2, &shm, &s2), cudaErrorInvalidValue);
    struct cudaFuncAttributes fa;
    SIM_CHECK_RT(cudaFuncGetAttributes(&fa, (const void *)stub_kernel), cudaSuccess);
    SIM_CHECK_EQ(fa.maxThreadsPerBlock, 1024);
    SIM_CHECK_EQ(fa.binaryVersion, 90);
    SIM_CHECK_RT(cudaFuncGetAttributes(&fa, (const void *)unregistered),
                 cudaErrorInvalidDeviceFunction);
    int blocks = 0;
    SIM_CHECK_RT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)stub_kernel,
                                                               256, 0),
                 cudaSuccess);
    SIM_CHECK_EQ(blocks, 8);
}
SIM_TEST(launches, launches_body, NULL)

static void streams_events_copies_body(void)
{
    cudaStream_t s = NULL;
    SIM_CHECK_RT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -9), cudaSuccess);
    int prio = 0;
    SIM_CHECK_RT(cudaStreamGetPriority(s, &prio), cudaSuccess);
    SIM_CHECK_EQ(prio, -5); /* clamped to the greatest priority */
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    SIM_CHECK_RT(cudaStreamIsCapturing(s, &st), cudaSuccess);
    SIM_CHECK_EQ(st, cudaStreamCaptureStatusNone);
    SIM_CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorNotSupported);
    cudaEvent_t a = NULL, b = NULL;
    SIM_CHECK_RT(cudaEventCreate(&a), cudaSuccess);
    SIM_CHECK_RT(cudaEventCreate(&b), cudaSuccess);
    float ms = -1;
    SIM_CHECK_RT(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle); /* unrecorded */
    SIM_CHECK_RT(cudaEventRecord(a, s), cudaSuccess);
    SIM_CHECK_RT(cudaEventRecord(b, s), cudaSuccess);
    SIM_CHECK_RT(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    SIM_CHECK(ms >= 0);
    SIM_CHECK_RT(cudaStreamWaitEvent(s, b, 0), cudaSuccess);
    SIM_CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
    SIM_CHECK_RT(cudaEventDestroy(a), cudaSuccess);
    SIM_CHECK_RT(cudaEventDestroy(b), cudaSuccess);

    /* What a copy or memset wrote into device memory reads back; what none
     * wrote reads as zeros (kernels compute nothing); host to host is a real
     * copy. */
    void *d = NULL;
    SIM_CHECK_RT(cudaMalloc(&d, 4096), cudaSuccess);
    char src[64], dst[64];
    memset(src, 'x', sizeof src);
    memset(dst, 'y', sizeof dst);
    SIM_CHECK_RT(cudaMemcpyAsync(d, src, sizeof src, cudaMemcpyHostToDevice, s), cudaSuccess);
    SIM_CHECK_RT(cudaMemcpy(dst, d, sizeof dst, cudaMemcpyDefault), cudaSuccess);
    SIM_CHECK(dst[0] == 'x' && dst[63] == 'x');
    SIM_CHECK_RT(cudaMemcpy(dst, (char *)d + 32, sizeof dst, cudaMemcpyDeviceToHost), cudaSuccess);
    SIM_CHECK(dst[0] == 'x' && dst[31] == 'x' && dst[32] == 0 && dst[63] == 0);
    /* device to device carries it; a memset overwrites part of it */
    SIM_CHECK_RT(cudaMemcpy((char *)d + 1024, d, 64, cudaMemcpyDeviceToDevice), cudaSuccess);
    SIM_CHECK_RT(cudaMemsetAsync((char *)d + 1024 + 16, 7, 8, s), cudaSuccess);
    SIM_CHECK_RT(cudaMemcpy(dst, (char *)d + 1024, sizeof dst, cudaMemcpyDeviceToHost),
                 cudaSuccess);
    SIM_CHECK(dst[15] == 'x' && dst[16] == 7 && dst[23] == 7 && dst[24] == 'x');
    SIM_CHECK_RT(cudaMemcpy(dst, src, sizeof dst, cudaMemcpyHostToHost), cudaSuccess);
    SIM_CHECK(dst[0] == 'x' && dst[63] == 'x');
    SIM_CHECK_RT(cudaMemsetAsync(d, 1, 4096, s), cudaSuccess);
    SIM_CHECK_RT(cudaMemcpy(dst, (char *)d + 4000, sizeof dst, cudaMemcpyDeviceToHost),
                 cudaSuccess);
    SIM_CHECK(dst[0] == 1 && dst[63] == 1);
    SIM_CHECK_RT(cudaMemcpy(dst, src, 8, (enum cudaMemcpyKind)7), cudaErrorInvalidValue);
    struct cudaPointerAttributes pa;
    SIM_CHECK_RT(cudaPointerGetAttributes(&pa, d), cudaSuccess);
    SIM_CHECK(pa.type == cudaMemoryTypeDevice && pa.device == 0 && pa.devicePointer == d);
    SIM_CHECK_RT(cudaPointerGetAttributes(&pa, src), cudaSuccess);
    SIM_CHECK_EQ(pa.type, cudaMemoryTypeUnregistered);
    /* page-locked host memory is told apart (PyTorch's is_pinned() asks),
     * inside its range, until it is freed or unregistered */
    char *pinned = NULL;
    SIM_CHECK_RT(cudaMallocHost((void **)&pinned, 4096), cudaSuccess);
    SIM_CHECK_RT(cudaPointerGetAttributes(&pa, pinned + 100), cudaSuccess);
    SIM_CHECK(pa.type == cudaMemoryTypeHost && pa.hostPointer == pinned + 100);
    SIM_CHECK_RT(cudaFreeHost(pinned), cudaSuccess);
    SIM_CHECK_RT(cudaHostRegister(src, sizeof src, 0), cudaSuccess);
    SIM_CHECK_RT(cudaPointerGetAttributes(&pa, src + 1), cudaSuccess);
    SIM_CHECK_EQ(pa.type, cudaMemoryTypeHost);
    SIM_CHECK_RT(cudaHostUnregister(src), cudaSuccess);
    SIM_CHECK_RT(cudaPointerGetAttributes(&pa, src), cudaSuccess);
    SIM_CHECK_EQ(pa.type, cudaMemoryTypeUnregistered);
    SIM_CHECK_RT(cudaFree(d), cudaSuccess);
    SIM_CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
    SIM_CHECK_RT(cudaStreamDestroy(NULL), cudaErrorInvalidResourceHandle);
    cudaIpcMemHandle_t ipc;
    SIM_CHECK_RT(cudaIpcGetMemHandle(&ipc, d), cudaErrorNotSupported);
}
SIM_TEST(streams_events_copies, streams_events_copies_body, NULL)

/* The kept bytes are bounded (SIMCUDA_BACKING, oldest first out), and the
 * first read of bytes no copy wrote is reported once. */
static void backing_body(void)
{
    char *d = NULL, buf[4096], out[4096];
    SIM_CHECK_RT(cudaMalloc((void **)&d, 3 * MiB), cudaSuccess);
    memset(buf, 'a', sizeof buf);
    SIM_CHECK_RT(cudaMemcpy(d, buf, sizeof buf, cudaMemcpyHostToDevice), cudaSuccess);
    memset(buf, 'b', sizeof buf);
    SIM_CHECK_RT(cudaMemcpy(d + 8192, buf, sizeof buf, cudaMemcpyHostToDevice), cudaSuccess);
    SIM_CHECK_RT(cudaMemcpy(out, d + 8192, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
    SIM_CHECK(out[0] == 'b' && out[4095] == 'b');
    SIM_CHECK_RT(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
    SIM_CHECK(out[0] == 0 && out[4095] == 0); /* 'a' went first: 4 KiB are kept */
    SIM_CHECK_RT(cudaMemcpy(out, d + MiB, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
}

static void backing_bounded_and_noted_once(void **state)
{
    static const char *const env[] = {"SIMCUDA_BACKING=4KiB", NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, backing_body, err, sizeof err);
    const char *note = strstr(err, "simcuda: note: a copy read 4096 bytes of device memory at "
                                   "0x");
    assert_non_null(note);
    assert_non_null(strstr(note, "that no copy or memset wrote: kernels compute nothing"));
    assert_null(strstr(note + 1, "simcuda: note:")); /* once */
}

/* The pool as PyTorch's cudaMallocAsync backend drives it. */
static void pool_body(void)
{
    cudaMemPool_t pool = NULL;
    SIM_CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    uint64_t keep = UINT64_MAX, v = 0;
    SIM_CHECK_RT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                 cudaSuccess);
    void *p = NULL;
    SIM_CHECK_RT(cudaMallocAsync(&p, 3 * MiB, NULL), cudaSuccess);
    SIM_CHECK_RT(cudaFreeAsync(p, NULL), cudaSuccess);
    SIM_CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v),
                 cudaSuccess);
    SIM_CHECK_EQ(v, 4 * MiB);
    SIM_CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v), cudaSuccess);
    SIM_CHECK_EQ(v, 3 * MiB);
    SIM_CHECK_RT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    SIM_CHECK_RT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v),
                 cudaSuccess);
    SIM_CHECK_EQ(v, 0);
}
SIM_TEST(pool, pool_body, NULL)

/* The simulated NVML answers for the simulated devices. */
static void nvml_body(void)
{
    /* Beside libcuda.so.1, by path: under ASan dlopen() is called from
     * libasan, so this program's RUNPATH would not be searched. */
    Dl_info where;
    SIM_CHECK(dladdr((void *)cuInit, &where) != 0 && where.dli_fname != NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s", where.dli_fname);
    char *slash = strrchr(path, '/');
    SIM_CHECK(slash != NULL);
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libnvidia-ml.so.1");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    SIM_CHECK(h != NULL);
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    int (*by_pci)(const char *, void **) =
        (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*fabric)(void *, void *) = (int (*)(void *, void *))dlsym(h, "nvmlDeviceGetGpuFabricInfoV");
    SIM_CHECK(init && count && by_pci && fabric);
    SIM_CHECK_EQ(init(), 0);
    unsigned n = 0;
    SIM_CHECK_EQ(count(&n), 0);
    SIM_CHECK_EQ(n, 2); /* SIMCUDA_DEVICES */
    void *dev = NULL;
    SIM_CHECK_EQ(by_pci("00000000:19:00.0", &dev), 0); /* PyTorch's format, device 1 */
    SIM_CHECK(dev != NULL);
    SIM_CHECK_EQ(by_pci("00000000:1a:00.0", &dev), 6); /* NVML_ERROR_NOT_FOUND */
    struct {
        unsigned version;
        unsigned char uuid[16];
        int status;
        unsigned clique;
        unsigned char state;
        unsigned health;
    } info;
    memset(&info, 0x55, sizeof info);
    info.version = 0x02000024; /* nvmlGpuFabricInfo_v2 */
    SIM_CHECK_EQ(fabric(dev, &info), 0);
    SIM_CHECK_EQ(info.state, 0); /* NVML_GPU_FABRIC_STATE_NOT_SUPPORTED */
    SIM_CHECK_EQ(info.version, 0x02000024);
    dlclose(h);
}
SIM_TEST(nvml, nvml_body, "SIMCUDA_DEVICES=2")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(properties),
        cmocka_unit_test(launches),
        cmocka_unit_test(streams_events_copies),
        cmocka_unit_test(backing_bounded_and_noted_once),
        cmocka_unit_test(pool),
        cmocka_unit_test(nvml),
    };
    return cmocka_run_group_tests_name("sim_kernels", tests, NULL, NULL);
}
