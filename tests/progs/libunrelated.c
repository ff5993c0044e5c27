/* libunrelated.c - a library with no CUDA in it, for late_threads.c to
 * load and unload while other threads make their first CUDA calls. */
int unrelated_answer(void);
int unrelated_answer(void)
{
    return 42;
}
