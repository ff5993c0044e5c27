/* test_sim_shared.c - SIMCUDA_SHARED: processes naming the same file share
 * the simulated device's memory (src/simgpu/driver/driver_shared.c): another
 * process's allocations lower cuMemGetInfo's free memory and make ours
 * fail, its frees and its death give the memory back; without the
 * variable each process has the whole device. */
#include <fcntl.h>

#include "sim_test.h"

/* A second process: forked before this one makes any CUDA call (so it
 * does not inherit a page map), it waits for a byte on `go` before each
 * step and answers one on `done` after it:
 *   1: allocates 20 MiB   2: frees it   3: allocates 20 MiB and dies
 *   holding it. */
static pid_t holder(int go[2], int done[2])
{
    SIM_CHECK(pipe(go) == 0 && pipe(done) == 0);
    pid_t pid = fork();
    SIM_CHECK(pid >= 0);
    if (pid != 0) {
        close(go[0]);
        close(done[1]);
        return pid;
    }
    /* Our death closes its pipe: it never outlives a failed check. */
    close(go[1]);
    close(done[0]);
    alarm(60);
    char c;
    CUdeviceptr p = 0;
    sim_test_ctx(0);
    for (int step = 1; step <= 3 && read(go[0], &c, 1) == 1; step++) {
        if (step == 2)
            SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
        else
            SIM_CHECK_CU(cuMemAlloc_v2(&p, 20 * MiB), CUDA_SUCCESS);
        SIM_CHECK(write(done[1], "x", 1) == 1);
    }
    _exit(0);
}

static void step(int go[2], int done[2])
{
    char c;
    SIM_CHECK(write(go[1], "x", 1) == 1);
    SIM_CHECK(read(done[0], &c, 1) == 1);
}

static char *shared_file(void)
{
    static char path[] = "/tmp/sim_shared_XXXXXX";
    int fd = mkstemp(path);
    SIM_CHECK(fd >= 0);
    close(fd);
    SIM_CHECK(setenv("SIMCUDA_SHARED", path, 1) == 0);
    return path;
}

static void shared_body(void)
{
    char *path = shared_file();
    int go[2], done[2];
    pid_t pid = holder(go, done);
    sim_test_ctx(0);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
    step(go, done); /* it holds 20 MiB */
    SIM_CHECK_EQ(sim_test_free(), 44 * MiB);
    CUdeviceptr p = 0;
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 46 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 44 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 0);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
    step(go, done); /* it frees */
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 60 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 4 * MiB);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
    step(go, done); /* it allocates and exits holding the memory */
    int status = -1;
    SIM_CHECK_EQ(waitpid(pid, &status, 0), pid);
    SIM_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB); /* a dead process holds nothing */
    unlink(path);
}
SIM_TEST(shared_between_processes, shared_body, "SIMCUDA_MEMORY=64MiB")

static void unshared_body(void)
{
    int go[2], done[2];
    pid_t pid = holder(go, done);
    sim_test_ctx(0);
    step(go, done);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB); /* its 20 MiB are not ours to see */
    CUdeviceptr p = 0;
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 64 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
    step(go, done);
    step(go, done);
    SIM_CHECK_EQ(waitpid(pid, NULL, 0), pid);
}
SIM_TEST(unshared_by_default, unshared_body, "SIMCUDA_MEMORY=64MiB")

static void bad_file_body(void)
{
    sim_test_ctx(0);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
}

static void bad_file(void **state)
{
    static const char *const env[] = {"SIMCUDA_MEMORY=64MiB",
                                      "SIMCUDA_SHARED=/nonexistent/dir/shared", NULL};
    char err[1024];
    (void)state;
    sim_test_run_capture(env, bad_file_body, err, sizeof err);
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_SHARED='/nonexistent/dir/shared': "
                                "cannot open it"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_between_processes),
        cmocka_unit_test(unshared_by_default),
        cmocka_unit_test(bad_file),
    };
    return cmocka_run_group_tests_name("sim_shared", tests, NULL, NULL);
}
