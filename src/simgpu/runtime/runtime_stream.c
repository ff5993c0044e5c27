/* runtime_stream.c - streams, events, stream capture and graphs of the
 * simulated runtime.
 *
 * Work on a simulated stream completes when it is issued, so streams and
 * events are small runtime objects with no driver state: queries answer
 * cudaSuccess, synchronisation returns at once (after a cuCtxSynchronize,
 * as NVIDIA's cudaDeviceSynchronize does), an event records the wall-clock
 * time so cudaEventElapsedTime measures host time between records.  The
 * handles cudaStreamLegacy (1) and cudaStreamPerThread (2) and NULL are
 * accepted everywhere a stream is.
 *
 * Capture: no stream is ever capturing; beginning a capture is
 * cudaErrorNotSupported (a graph of kernels that never run has nothing to
 * replay), and so is every graph and user-object call.  The per-thread
 * capture mode is kept, since libraries swap it around allocations.
 */
#include "runtime.h"

#include <stdlib.h>
#include <time.h>

#define STREAM_MAGIC 0x5354524du /* "STRM" */
#define EVENT_MAGIC 0x45564e54u  /* "EVNT" */

struct CUstream_st {
    unsigned int magic;
    unsigned int flags;
    int priority;
};

struct CUevent_st {
    unsigned int magic;
    unsigned int flags;
    int recorded;
    double ms; /* CLOCK_MONOTONIC at the last record */
};

static _Thread_local enum cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;

/* NULL, cudaStreamLegacy, cudaStreamPerThread, or one of ours.  Checking the
 * magic reads a freed stream's memory only for a caller that already has a
 * use-after-free. */
static int valid_stream(cudaStream_t s)
{
    return (uintptr_t)s <= 2 || s->magic == STREAM_MAGIC;
}

static int valid_event(cudaEvent_t ev)
{
    return ev != NULL && ev->magic == EVENT_MAGIC;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Synchronising with a stream or event is synchronising the context. */
static cudaError_t sync_context(void)
{
    cudaError_t e = runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuCtxSynchronize, ());
    return e;
}

/* ---- streams ---- */

static cudaError_t stream_create(cudaStream_t *p, unsigned int flags, int priority)
{
    cudaError_t e = p == NULL || (flags & ~(unsigned)cudaStreamNonBlocking) != 0
                        ? cudaErrorInvalidValue
                        : runtime_context();
    if (e != cudaSuccess)
        return e;
    struct CUstream_st *s = malloc(sizeof *s);
    if (s == NULL)
        return cudaErrorMemoryAllocation;
    /* Clamped into [greatest, least] = [-5, 0], as documented. */
    s->magic = STREAM_MAGIC;
    s->flags = flags;
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    *p = s;
    return cudaSuccess;
}

RUNTIME_CALL(cudaStreamCreate, (cudaStream_t *pStream), stream_create(pStream, 0, 0), "() -> %p",
             e == cudaSuccess ? (void *)*pStream : NULL)
RUNTIME_CALL(cudaStreamCreateWithFlags, (cudaStream_t *pStream, unsigned int flags),
             stream_create(pStream, flags, 0), "(%u) -> %p", flags,
             e == cudaSuccess ? (void *)*pStream : NULL)
RUNTIME_CALL(cudaStreamCreateWithPriority,
             (cudaStream_t *pStream, unsigned int flags, int priority),
             stream_create(pStream, flags, priority), "(%u, %d) -> %p", flags, priority,
             e == cudaSuccess ? (void *)*pStream : NULL)

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    RUNTIME_ENTER(cudaStreamDestroy);
    cudaError_t e = runtime_ready();
    if (e == cudaSuccess && ((uintptr_t)stream <= 2 || !valid_stream(stream)))
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess) {
        stream->magic = 0;
        free(stream);
    }
    return runtime_leave(RSYM_cudaStreamDestroy, e, "(%p)", (void *)stream);
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    RUNTIME_ENTER(cudaStreamGetPriority);
    cudaError_t e = priority == NULL ? cudaErrorInvalidValue : runtime_ready();
    if (e == cudaSuccess && !valid_stream(hStream))
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess)
        *priority = (uintptr_t)hStream <= 2 ? 0 : hStream->priority;
    return runtime_leave(RSYM_cudaStreamGetPriority, e, "(%p)", (void *)hStream);
}

RUNTIME_CALL(cudaStreamQuery, (cudaStream_t stream),
             valid_stream(stream) ? runtime_context() : cudaErrorInvalidResourceHandle, "(%p)",
             (void *)stream)
RUNTIME_CALL(cudaStreamSynchronize, (cudaStream_t stream),
             valid_stream(stream) ? sync_context() : cudaErrorInvalidResourceHandle, "(%p)",
             (void *)stream)

RUNTIME_CALL(cudaStreamWaitEvent, (cudaStream_t stream, cudaEvent_t event, unsigned int flags),
             valid_stream(stream) && valid_event(event) ? runtime_context()
                                                        : cudaErrorInvalidResourceHandle,
             "(%p, %p, %u)", (void *)stream, (void *)event, flags)

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                  void *userData, unsigned int flags)
{
    RUNTIME_ENTER(cudaStreamAddCallback);
    cudaError_t e = callback == NULL || flags != 0 ? cudaErrorInvalidValue
                    : valid_stream(stream)         ? runtime_context()
                                                   : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess)
        callback(stream, cudaSuccess, userData);
    return runtime_leave(RSYM_cudaStreamAddCallback, e, "(%p)", (void *)stream);
}

/* ---- capture ---- */

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    RUNTIME_ENTER(cudaStreamIsCapturing);
    cudaError_t e = pCaptureStatus == NULL ? cudaErrorInvalidValue
                    : valid_stream(stream) ? runtime_ready()
                                           : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess)
        *pCaptureStatus = cudaStreamCaptureStatusNone;
    return runtime_leave(RSYM_cudaStreamIsCapturing, e, "(%p)", (void *)stream);
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus *captureStatus_out,
                                     unsigned long long *id_out, cudaGraph_t *graph_out,
                                     const cudaGraphNode_t **dependencies_out,
                                     const cudaGraphEdgeData **edgeData_out,
                                     size_t *numDependencies_out)
{
    RUNTIME_ENTER(cudaStreamGetCaptureInfo);
    cudaError_t e = captureStatus_out == NULL ? cudaErrorInvalidValue
                    : valid_stream(stream)    ? runtime_ready()
                                              : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess) {
        /* Documented: the other outputs are only written while capturing;
         * zero them anyway so that no caller reads garbage. */
        *captureStatus_out = cudaStreamCaptureStatusNone;
        if (id_out != NULL)
            *id_out = 0;
        if (graph_out != NULL)
            *graph_out = NULL;
        if (dependencies_out != NULL)
            *dependencies_out = NULL;
        if (edgeData_out != NULL)
            *edgeData_out = NULL;
        if (numDependencies_out != NULL)
            *numDependencies_out = 0;
    }
    return runtime_leave(RSYM_cudaStreamGetCaptureInfo, e, "(%p)", (void *)stream);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    RUNTIME_ENTER(cudaThreadExchangeStreamCaptureMode);
    cudaError_t e = mode == NULL || (unsigned)*mode > cudaStreamCaptureModeRelaxed
                        ? cudaErrorInvalidValue
                        : cudaSuccess;
    if (e == cudaSuccess) {
        enum cudaStreamCaptureMode old = capture_mode;
        capture_mode = *mode;
        *mode = old;
    }
    return runtime_leave(RSYM_cudaThreadExchangeStreamCaptureMode, e, "()");
}

/* Every call below is refused: graphs are not simulated. */
#define GRAPHS "graphs are not simulated"
RUNTIME_REFUSED(GRAPHS, cudaStreamBeginCapture,
                (cudaStream_t stream, enum cudaStreamCaptureMode mode))
RUNTIME_REFUSED(GRAPHS, cudaStreamBeginCaptureToGraph,
                (cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,
                 const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                 enum cudaStreamCaptureMode mode))
RUNTIME_REFUSED(GRAPHS, cudaStreamEndCapture, (cudaStream_t stream, cudaGraph_t *pGraph))
RUNTIME_REFUSED(GRAPHS, cudaStreamUpdateCaptureDependencies,
                (cudaStream_t stream, cudaGraphNode_t *dependencies,
                 const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                 unsigned int flags))
RUNTIME_REFUSED(GRAPHS, cudaGraphAddNode,
                (cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                 const cudaGraphNode_t *pDependencies, const cudaGraphEdgeData *dependencyData,
                 size_t numDependencies, struct cudaGraphNodeParams *nodeParams))
RUNTIME_REFUSED(GRAPHS, cudaGraphConditionalHandleCreate,
                (cudaGraphConditionalHandle *pHandle_out, cudaGraph_t graph,
                 unsigned int defaultLaunchValue, unsigned int flags))
RUNTIME_REFUSED(GRAPHS, cudaGraphDestroy, (cudaGraph_t graph))
RUNTIME_REFUSED(GRAPHS, cudaGraphExecDestroy, (cudaGraphExec_t graphExec))
RUNTIME_REFUSED(GRAPHS, cudaGraphGetNodes,
                (cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes))
RUNTIME_REFUSED(GRAPHS, cudaGraphInstantiate,
                (cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags))
RUNTIME_REFUSED(GRAPHS, cudaGraphInstantiateWithFlags,
                (cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags))
RUNTIME_REFUSED(GRAPHS, cudaGraphLaunch, (cudaGraphExec_t graphExec, cudaStream_t stream))
RUNTIME_REFUSED(GRAPHS, cudaGraphNodeGetDependencies,
                (cudaGraphNode_t node, cudaGraphNode_t *pDependencies, cudaGraphEdgeData *edgeData,
                 size_t *pNumDependencies))
RUNTIME_REFUSED(GRAPHS, cudaGraphRetainUserObject,
                (cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                 unsigned int flags))
RUNTIME_REFUSED(GRAPHS, cudaUserObjectCreate,
                (cudaUserObject_t *object_out, void *ptr, cudaHostFn_t destroy,
                 unsigned int initialRefcount, unsigned int flags))
RUNTIME_REFUSED(GRAPHS, cudaUserObjectRelease, (cudaUserObject_t object, unsigned int count))

/* No graph ever allocates: the graph pool is empty. */
cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                           void *value)
{
    RUNTIME_ENTER(cudaDeviceGetGraphMemAttribute);
    cudaError_t e = value == NULL || (unsigned)attr > cudaGraphMemAttrReservedMemHigh
                        ? cudaErrorInvalidValue
                        : runtime_check_device(device);
    if (e == cudaSuccess)
        *(cuuint64_t *)value = 0;
    return runtime_leave(RSYM_cudaDeviceGetGraphMemAttribute, e, "(%d, %d)", device, (int)attr);
}

RUNTIME_CALL(cudaDeviceSetGraphMemAttribute,
             (int device, enum cudaGraphMemAttributeType attr, void *value),
             value == NULL || (attr != cudaGraphMemAttrUsedMemHigh &&
                               attr != cudaGraphMemAttrReservedMemHigh)
                 ? cudaErrorInvalidValue
                 : runtime_check_device(device),
             "(%d, %d)", device, (int)attr)

/* ---- events ---- */

static cudaError_t event_create(cudaEvent_t *event, unsigned int flags)
{
    cudaError_t e = event == NULL || (flags & ~0x0fu) != 0 ? cudaErrorInvalidValue
                                                           : runtime_context();
    if (e != cudaSuccess)
        return e;
    struct CUevent_st *ev = calloc(1, sizeof *ev);
    if (ev == NULL)
        return cudaErrorMemoryAllocation;
    ev->magic = EVENT_MAGIC;
    ev->flags = flags;
    *event = ev;
    return cudaSuccess;
}

RUNTIME_CALL(cudaEventCreate, (cudaEvent_t *event), event_create(event, 0), "() -> %p",
             e == cudaSuccess ? (void *)*event : NULL)
RUNTIME_CALL(cudaEventCreateWithFlags, (cudaEvent_t *event, unsigned int flags),
             event_create(event, flags), "(%u) -> %p", flags,
             e == cudaSuccess ? (void *)*event : NULL)

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    RUNTIME_ENTER(cudaEventDestroy);
    cudaError_t e = valid_event(event) ? runtime_ready() : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess) {
        event->magic = 0;
        free(event);
    }
    return runtime_leave(RSYM_cudaEventDestroy, e, "(%p)", (void *)event);
}

static cudaError_t event_record(cudaEvent_t event, cudaStream_t stream)
{
    cudaError_t e = valid_event(event) && valid_stream(stream) ? runtime_context()
                                                              : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess) {
        event->recorded = 1;
        event->ms = now_ms();
    }
    return e;
}

RUNTIME_CALL(cudaEventRecord, (cudaEvent_t event, cudaStream_t stream), event_record(event, stream),
             "(%p, %p)", (void *)event, (void *)stream)
RUNTIME_CALL(cudaEventRecordWithFlags, (cudaEvent_t event, cudaStream_t stream, unsigned int flags),
             flags > 1 ? cudaErrorInvalidValue : event_record(event, stream), "(%p, %p, %u)",
             (void *)event, (void *)stream, flags)
RUNTIME_CALL(cudaEventQuery, (cudaEvent_t event),
             valid_event(event) ? runtime_ready() : cudaErrorInvalidResourceHandle, "(%p)",
             (void *)event)
RUNTIME_CALL(cudaEventSynchronize, (cudaEvent_t event),
             valid_event(event) ? sync_context() : cudaErrorInvalidResourceHandle, "(%p)",
             (void *)event)

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    RUNTIME_ENTER(cudaEventElapsedTime);
    cudaError_t e = ms == NULL ? cudaErrorInvalidValue
                    : !valid_event(start) || !valid_event(end) ||
                            ((start->flags | end->flags) & cudaEventDisableTiming)
                        ? cudaErrorInvalidResourceHandle
                    : !start->recorded || !end->recorded ? cudaErrorInvalidResourceHandle
                                                         : runtime_ready();
    if (e == cudaSuccess)
        *ms = (float)(end->ms - start->ms);
    return runtime_leave(RSYM_cudaEventElapsedTime, e, "()");
}
