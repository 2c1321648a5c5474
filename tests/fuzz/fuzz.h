/*
 * What every libFuzzer harness here shares: the entry points libFuzzer
 * calls, declared (the build warns about functions without a
 * prototype), and a quiet log, since each refused input would print a
 * warning and slow the fuzzer down.
 */
#ifndef TACL_FUZZ_H
#define TACL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("TACL_DEBUG", "NONE", 1);
    return 0;
}

#endif
