/* dlsym_trampoline.S - our dlsym override, in assembly for one reason:
 * glibc's dlsym reads its caller's return address to decide what RTLD_NEXT
 * means.  A C wrapper that calls the real dlsym makes *us* the caller and
 * breaks every other library's dlsym(RTLD_NEXT, ...).  Here the C part
 * (resolve_dlsym_substitute) only decides whether to substitute a wrapper;
 * otherwise we restore the arguments and *jump* to the real dlsym, so the
 * return address it sees is the original caller's.
 */
#if defined(__x86_64__)
    .text
    .globl  dlsym
    .type   dlsym, @function
dlsym:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp                 /* 16-byte alignment for the call */
    .cfi_adjust_cfa_offset 8
    call    resolve_dlsym_substitute
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testq   %rax, %rax
    jz      1f
    ret
1:  movq    resolve_real_dlsym(%rip), %rax
    testq   %rax, %rax
    jz      2f
    jmp     *%rax                    /* tail jump: caller identity kept */
2:  ret                              /* no real dlsym at all: NULL */
    .cfi_endproc
    .size   dlsym, .-dlsym

#elif defined(__aarch64__)
    .text
    .globl  dlsym
    .type   dlsym, %function
dlsym:
    .cfi_startproc
    stp     x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov     x29, sp
    stp     x0, x1, [sp, #16]
    bl      resolve_dlsym_substitute
    mov     x9, x0
    ldp     x0, x1, [sp, #16]
    ldp     x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    cbz     x9, 1f
    mov     x0, x9
    ret
1:  adrp    x9, resolve_real_dlsym
    ldr     x9, [x9, #:lo12:resolve_real_dlsym]
    cbz     x9, 2f
    br      x9                       /* tail jump: caller identity kept */
2:  mov     x0, #0
    ret
    .cfi_endproc
    .size   dlsym, .-dlsym
#else
#error "dlsym trampoline: add this architecture (see the comment above)"
#endif

    .section .note.GNU-stack,"",%progbits
