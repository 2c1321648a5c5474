/*
 * The cuda_ipc transport's cache of peers' allocations opened here (see
 * cuda_ipc.h): a cudaIpc handle opened with cuIpcOpenMemHandle, or a
 * cuMem descriptor imported, mapped at a range reserved here and made
 * accessible from the receiving device.  An entry is keyed by the kind,
 * the allocation's id in its owner and the device it is opened for, so a
 * later allocation at the same address (a new id) is opened anew.
 *
 * Lifetimes (cuda_ipc.h states the rule): a cudaIpc mapping is closed
 * when the last copy reading it ends, which is before the FIN that lets
 * its owner free the memory; a cuMem mapping stays until the owner's
 * FREED (dropped at once, or once the copies reading it end), or until
 * every entry is taken and it is the least recently used one no copy
 * reads.
 */
#include <stdatomic.h>
#include <string.h>

#include "cuda_ipc.h"
#include "log.h"

static _Atomic uint64_t cipc_opens;

uint64_t tacl__cipc_open_count(void)
{
    return atomic_load(&cipc_opens);
}

#if TACL_HAVE_CUDA
static void close_entry(tacl__cipc_map_t *m)
{
    const tacl__cu_t *cu = tacl__cu();
    CUdeviceptr base = (CUdeviceptr)m->base;

    if (cu != NULL && tacl__cu_push(m->device) == 0) {
        if (m->mem == TACL_CIPC_MEM_LEGACY) {
            cu->cuIpcCloseMemHandle(base);
        } else {
            cu->cuMemUnmap(base, m->size);
            cu->cuMemAddressFree(base, m->size);
            cu->cuMemRelease((CUmemGenericAllocationHandle)m->handle);
        }
        tacl__cu_pop();
    }
    memset(m, 0, sizeof(*m));
}

/* Import, reserve, map and grant access; undone on failure. */
static CUresult open_vmm(const tacl__cu_t *cu, tacl__cipc_map_t *m, int fd,
                         const char **what_p)
{
    CUmemGenericAllocationHandle h;
    CUmemAccessDesc access;
    CUdeviceptr va = 0;
    CUresult res;

    *what_p = "cuMemImportFromShareableHandle";
    res = cu->cuMemImportFromShareableHandle(
        &h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (res != CUDA_SUCCESS)
        return res;
    *what_p = "cuMemAddressReserve";
    res = cu->cuMemAddressReserve(&va, m->size, 0, 0, 0);
    if (res == CUDA_SUCCESS) {
        *what_p = "cuMemMap";
        res = cu->cuMemMap(va, m->size, 0, h, 0);
        if (res == CUDA_SUCCESS) {
            memset(&access, 0, sizeof(access));
            access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            access.location.id = m->device;
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            *what_p = "cuMemSetAccess";
            res = cu->cuMemSetAccess(va, m->size, &access, 1);
            if (res != CUDA_SUCCESS)
                cu->cuMemUnmap(va, m->size);
        }
        if (res != CUDA_SUCCESS)
            cu->cuMemAddressFree(va, m->size);
    }
    if (res != CUDA_SUCCESS) {
        cu->cuMemRelease(h);
        return res;
    }
    m->base = (uint64_t)va;
    m->handle = (uint64_t)h;
    return CUDA_SUCCESS;
}

/* Open the allocation msg names into the free entry m. */
static tacl_status_t open_entry(tacl__cipc_peer_t *peer, tacl__cipc_map_t *m,
                                const tacl__cipc_msg_t *msg, int fd,
                                int device)
{
    const tacl__cu_t *cu = tacl__cu();
    const char *what = "cuIpcOpenMemHandle";
    CUresult res;

    if (msg->mem == TACL_CIPC_MEM_VMM && fd < 0)
        return tacl__error(TACL_ERR_INTERNAL, IPC,
                           "rank %d's message from device allocation %llu "
                           "came without its descriptor", peer->rank,
                           (unsigned long long)msg->alloc_id);
    res = (CUresult)tacl__cu_push(device);
    if (res != CUDA_SUCCESS)
        return tacl__error(TACL_ERR_SYSTEM, IPC,
                           "cannot use CUDA device %d to receive from rank "
                           "%d: %s", device, peer->rank, tacl__cu_str(res));
    m->mem = msg->mem;
    m->device = device;
    m->id = msg->alloc_id;
    m->size = msg->alloc_size;
    if (msg->mem == TACL_CIPC_MEM_LEGACY) {
        CUipcMemHandle h;
        CUdeviceptr base = 0;

        memcpy(&h, msg->handle, sizeof(h));
        res = cu->cuIpcOpenMemHandle(&base, h,
                                     CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        m->base = (uint64_t)base;
    } else {
        res = open_vmm(cu, m, fd, &what);
    }
    tacl__cu_pop();
    if (res != CUDA_SUCCESS) {
        memset(m, 0, sizeof(*m));
        return tacl__error(TACL_ERR_SYSTEM, IPC,
                           "%s of rank %d's device allocation %llu (%llu "
                           "bytes) on device %d failed: %s", what,
                           peer->rank, (unsigned long long)msg->alloc_id,
                           (unsigned long long)msg->alloc_size, device,
                           tacl__cu_str(res));
    }
    atomic_fetch_add(&cipc_opens, 1);
    TACL_INFO(IPC, "opened rank %d's device allocation %llu (%llu bytes, "
              "%s) at 0x%llx on device %d", peer->rank,
              (unsigned long long)m->id, (unsigned long long)m->size,
              m->mem == TACL_CIPC_MEM_LEGACY ? "cudaIpc handle"
                                             : "cuMem descriptor",
              (unsigned long long)m->base, device);
    return TACL_OK;
}

int tacl__cipc_map_get(tacl__cipc_peer_t *peer, const tacl__cipc_msg_t *msg,
                       int fd, int device, tacl_status_t *status_p)
{
    tacl__cipc_map_t *e = peer->maps;
    int hit = -1, spare = -1;

    for (int i = 0; i < TACL_CIPC_MAPS; i++) {
        tacl__cipc_map_t *m = &e[i];

        if (m->mem == msg->mem && m->id == msg->alloc_id &&
            m->device == device && !m->stale) {
            hit = i;
            break;
        }
        if (m->mem == TACL_CIPC_MEM_NONE) {
            if (spare < 0 || e[spare].mem != TACL_CIPC_MEM_NONE)
                spare = i;      /* a free entry before any eviction */
        } else if (!m->busy && (spare < 0 ||
                                (e[spare].mem != TACL_CIPC_MEM_NONE &&
                                 m->used < e[spare].used))) {
            spare = i;
        }
    }
    if (hit >= 0 && e[hit].size != msg->alloc_size) {
        *status_p = tacl__error(TACL_ERR_INTERNAL, IPC,
                                "rank %d's device allocation %llu changed "
                                "size", peer->rank,
                                (unsigned long long)msg->alloc_id);
        return -1;
    }
    if (hit < 0) {
        if (spare < 0) {
            *status_p = tacl__error(TACL_ERR_NO_MEMORY, IPC,
                                    "%d of rank %d's device allocations are "
                                    "being read at once; no room to open "
                                    "another", TACL_CIPC_MAPS, peer->rank);
            return -1;
        }
        if (e[spare].mem != TACL_CIPC_MEM_NONE)
            close_entry(&e[spare]);
        *status_p = open_entry(peer, &e[spare], msg, fd, device);
        if (*status_p != TACL_OK)
            return -1;
        hit = spare;
    }
    e[hit].used = ++peer->clock;
    e[hit].busy++;
    return hit;
}

void tacl__cipc_map_release(tacl__cipc_peer_t *peer, int i)
{
    tacl__cipc_map_t *m = &peer->maps[i];

    if (m->busy > 0)
        m->busy--;
    /* Memory the owner may free unannounced is unmapped at once. */
    if (m->busy == 0 && (m->stale || m->mem == TACL_CIPC_MEM_LEGACY))
        close_entry(m);
}

void tacl__cipc_map_freed(tacl__cipc_peer_t *peer, uint64_t id)
{
    for (int i = 0; i < TACL_CIPC_MAPS; i++) {
        tacl__cipc_map_t *m = &peer->maps[i];

        if (m->mem != TACL_CIPC_MEM_VMM || m->id != id)
            continue;
        m->stale = 1;
        if (m->busy == 0)
            close_entry(m);
    }
}

void tacl__cipc_map_clear(tacl__cipc_peer_t *peer)
{
    for (int i = 0; i < TACL_CIPC_MAPS; i++)
        if (peer->maps[i].mem != TACL_CIPC_MEM_NONE)
            close_entry(&peer->maps[i]);
}
#endif
