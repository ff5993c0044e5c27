/* test_sim_dnn.c - the stand-in cuDNN (src/simgpu/dnn): graph-API
 * descriptors keep every attribute and read it back, a descriptor attribute
 * is copied into the caller's descriptors, the heuristic offers one engine
 * configuration, the plan's workspace is SIMCUDA_CUDNN_WORKSPACE, legacy
 * tensor/filter descriptors round-trip, and what is not simulated says so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

int cudnnCreate(void **h);
size_t cudnnGetVersion(void);
int cudnnGetProperty(int type, int *value);
int cudnnBackendCreateDescriptor(int type, void **d);
int cudnnBackendDestroyDescriptor(void *d);
int cudnnBackendSetAttribute(void *d, int name, int type, int64_t n, const void *v);
int cudnnBackendGetAttribute(void *d, int name, int type, int64_t req, int64_t *n, void *v);
int cudnnBackendFinalize(void *d);
int cudnnBackendExecute(void *h, void *plan, void *pack);
int cudnnCreateTensorDescriptor(void **d);
int cudnnDestroyTensorDescriptor(void *d);
int cudnnSetTensorNdDescriptor(void *d, int dt, int nb, const int *dims, const int *strides);
int cudnnGetTensorNdDescriptor(void *d, int req, int *dt, int *nb, int *dims, int *strides);
int cudnnGetBatchNormalizationTrainingExReserveSpaceSize(void *h, int mode, int ops, void *act,
                                                         void *x, size_t *size);
int cudnnGetRNNWeightSpaceSize(void *h, void *rnn, size_t *size);
int cudnnBatchNormalizationForwardTrainingEx(void);

#define OK 0
#define BAD_PARAM 2000
#define NOT_SUPPORTED 3000
/* descriptor types, attribute types and names (cudnn_graph.h) */
#define ENGINECFG 3
#define ENGINEHEUR 4
#define PLAN 5
#define OPGRAPH 15
#define VARIANT_PACK 16
#define TENSOR 17
#define ENGINE 2
#define T_INT64 3
#define T_DESC 15
#define TENSOR_DIMENSIONS 902
#define ENGINEHEUR_OPERATION_GRAPH 201
#define ENGINEHEUR_RESULTS 202
#define ENGINECFG_ENGINE 300
#define PLAN_ENGINE_CONFIG 401
#define PLAN_WORKSPACE_SIZE 402
#define OPGRAPH_ENGINE_GLOBAL_COUNT 802
#define ENGINE_GLOBAL_INDEX 1301
#define ENGINE_KNOB_INFO 1302

/* cuDNN has no cudnnDestroy among PyTorch's imports: the handles live here,
 * reachable, for the whole test (as in PyTorch, for the whole process). */
static void *handles[2];

static void *make(int type)
{
    void *d = NULL;
    assert_int_equal(cudnnBackendCreateDescriptor(type, &d), OK);
    return d;
}

static void attributes_round_trip(void **state)
{
    (void)state;
    void *t = make(TENSOR);
    int64_t dims[4] = {8, 3, 32, 32}, back[4] = {0}, n = -1;
    assert_int_equal(cudnnBackendSetAttribute(t, TENSOR_DIMENSIONS, T_INT64, 4, dims), OK);
    assert_int_equal(cudnnBackendGetAttribute(t, TENSOR_DIMENSIONS, T_INT64, 4, &n, back), OK);
    assert_int_equal(n, 4);
    assert_memory_equal(back, dims, sizeof dims);
    /* asking for fewer gives the count and what fits */
    memset(back, 0, sizeof back);
    assert_int_equal(cudnnBackendGetAttribute(t, TENSOR_DIMENSIONS, T_INT64, 2, &n, back), OK);
    assert_int_equal(n, 4);
    assert_true(back[1] == 3 && back[2] == 0);
    /* the wrong type is refused; finalize freezes the attributes */
    assert_int_equal(cudnnBackendGetAttribute(t, TENSOR_DIMENSIONS, T_DESC, 1, &n, back),
                     BAD_PARAM);
    assert_int_equal(cudnnBackendFinalize(t), OK);
    assert_int_equal(cudnnBackendSetAttribute(t, TENSOR_DIMENSIONS, T_INT64, 4, dims),
                     NOT_SUPPORTED);
    /* an attribute never set reads as no elements */
    assert_int_equal(cudnnBackendGetAttribute(t, 999, T_INT64, 1, &n, back), OK);
    assert_int_equal(n, 0);
    assert_int_equal(cudnnBackendDestroyDescriptor(t), OK);
}

static void heuristic_offers_one_engine_and_plan_workspace(void **state)
{
    (void)state;
    assert_int_equal(cudnnCreate(&handles[0]), OK);
    void *h = handles[0];
    void *graph = make(OPGRAPH), *heur = make(ENGINEHEUR);
    int64_t n = -1, v = -1;
    assert_int_equal(cudnnBackendFinalize(graph), OK);
    assert_int_equal(cudnnBackendGetAttribute(graph, OPGRAPH_ENGINE_GLOBAL_COUNT, T_INT64, 1, &n,
                                              &v), OK);
    assert_true(n == 1 && v == 1);
    assert_int_equal(cudnnBackendSetAttribute(heur, ENGINEHEUR_OPERATION_GRAPH, T_DESC, 1,
                                              &graph), OK);
    assert_int_equal(cudnnBackendFinalize(heur), OK);
    assert_int_equal(cudnnBackendGetAttribute(heur, ENGINEHEUR_RESULTS, T_DESC, 0, &n, NULL),
                     OK);
    assert_int_equal(n, 1);
    void *cfg[2] = {make(ENGINECFG), make(ENGINECFG)};
    assert_int_equal(cudnnBackendGetAttribute(heur, ENGINEHEUR_RESULTS, T_DESC, 2, &n, cfg), OK);
    assert_int_equal(n, 1);
    /* the configuration's engine is copied into the caller's descriptor */
    void *engine = make(ENGINE);
    assert_int_equal(cudnnBackendGetAttribute(cfg[0], ENGINECFG_ENGINE, T_DESC, 1, &n, &engine),
                     OK);
    assert_int_equal(n, 1);
    assert_int_equal(cudnnBackendGetAttribute(engine, ENGINE_GLOBAL_INDEX, T_INT64, 1, &n, &v),
                     OK);
    assert_true(n == 1 && v == 0);
    /* no knobs; a count asked for without an array, as the frontend does */
    assert_int_equal(cudnnBackendGetAttribute(engine, ENGINE_KNOB_INFO, T_DESC, 4, &n, NULL), OK);
    assert_int_equal(n, 0);
    n = -1;
    assert_int_equal(cudnnBackendGetAttribute(heur, ENGINEHEUR_RESULTS, T_DESC, 8, &n, NULL), OK);
    assert_int_equal(n, 1);
    void *plan = make(PLAN), *pack = make(VARIANT_PACK);
    assert_int_equal(cudnnBackendSetAttribute(plan, PLAN_ENGINE_CONFIG, T_DESC, 1, &cfg[0]), OK);
    assert_int_equal(cudnnBackendExecute(h, plan, pack), 1001); /* not finalized */
    assert_int_equal(cudnnBackendFinalize(plan), OK);
    assert_int_equal(cudnnBackendFinalize(pack), OK);
    assert_int_equal(cudnnBackendGetAttribute(plan, PLAN_WORKSPACE_SIZE, T_INT64, 1, &n, &v), OK);
    assert_int_equal(v, 3 << 20); /* SIMCUDA_CUDNN_WORKSPACE=3MiB (main) */
    assert_int_equal(cudnnBackendExecute(h, plan, pack), OK);
    void *all[] = {graph, heur, cfg[0], cfg[1], engine, plan, pack};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        assert_int_equal(cudnnBackendDestroyDescriptor(all[i]), OK);
}

static void legacy_descriptors_and_sizes(void **state)
{
    (void)state;
    void *t = NULL;
    int dims[4] = {2, 3, 4, 5}, strides[4] = {60, 20, 5, 1}, d2[4], s2[4], dt = -1, nb = -1;
    int major = -1;
    size_t size = 1;
    assert_int_equal(cudnnCreate(&handles[1]), OK);
    void *h = handles[1];
    assert_int_equal(cudnnGetVersion(), 92600);
    assert_int_equal(cudnnGetProperty(0, &major), OK);
    assert_int_equal(major, 9);
    assert_int_equal(cudnnCreateTensorDescriptor(&t), OK);
    assert_int_equal(cudnnSetTensorNdDescriptor(t, 2, 4, dims, strides), OK);
    assert_int_equal(cudnnGetTensorNdDescriptor(t, 4, &dt, &nb, d2, s2), OK);
    assert_true(dt == 2 && nb == 4);
    assert_memory_equal(d2, dims, sizeof dims);
    assert_memory_equal(s2, strides, sizeof strides);
    assert_int_equal(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, 1, 0, NULL, t, &size),
                     OK);
    assert_int_equal(size, 0);
    assert_int_equal(cudnnGetRNNWeightSpaceSize(h, NULL, &size), NOT_SUPPORTED);
    assert_int_equal(cudnnBatchNormalizationForwardTrainingEx(), OK); /* a kernel: nothing */
    assert_int_equal(cudnnDestroyTensorDescriptor(t), OK);
}

int main(void)
{
    setenv("SIMCUDA_CUDNN_WORKSPACE", "3MiB", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attributes_round_trip),
        cmocka_unit_test(heuristic_offers_one_engine_and_plan_workspace),
        cmocka_unit_test(legacy_descriptors_and_sizes),
    };
    return cmocka_run_group_tests_name("sim_dnn", tests, NULL, NULL);
}
