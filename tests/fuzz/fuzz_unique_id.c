/*
 * libFuzzer harness: the unique id.  A single-rank communicator is set
 * up from any bytes a user might pass as a tacl_unique_id_t: the id must
 * be refused with a status, or bind its listener and finish, never crash
 * or wait.  (Joining as a higher rank would connect to whatever address
 * the bytes name, so only rank 0 is fuzzed.)
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "bootstrap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tacl__bootstrap_t *bs = NULL;
    tacl_unique_id_t id;

    memset(&id, 0, sizeof(id));
    memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
    if (tacl__bootstrap_init(&id, 0, 1, 0.1, &bs) == TACL_OK)
        tacl__bootstrap_fini(bs);
    return 0;
}
