/* thread_hot.c - the block thread_hot.h describes. */
#include "thread_hot.h"

__thread struct thread_hot thread_hot __attribute__((tls_model("initial-exec")));
