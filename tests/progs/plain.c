/* plain.c - a process that never touches CUDA: must write no snapshot. */
#include <stdio.h>
int main(void)
{
    puts("no cuda here");
    return 0;
}
