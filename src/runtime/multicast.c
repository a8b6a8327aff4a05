/* Multicast objects: a team of devices, memory of each bound at offsets of
 * the object (cuMulticastBindMem for a VMM buffer's chunk, cuMulticastBindAddr
 * by address), and the object mapped into this process's address space
 * (its range is the multicast address multimem instructions use).
 *
 * The object keeps its devices and every bound buffer's memory (a memory
 * reference) until it is unbound; its destroy unbinds what is left and
 * releases the handle (cuMemRelease: release path). A mapping is a wrapped
 * buffer that keeps the object alive and unmaps at its release. */
#include "platform/release.h"
#include "runtime/vmm.h"
#include "util/checked.h"

#include <pthread.h>
#include <string.h>

typedef struct binding {
    struct binding *next;
    CUdevice device;
    size_t mc_offset, size;
    cuabi__buffer *buffer;          /* a memory reference while bound */
} binding;

typedef struct cuabi__multicast {
    cuabi__object base;
    CUmemGenericAllocationHandle handle;
    size_t size, granularity;
    cuabi__device **devices;        /* retained */
    size_t ndevices;
    const cuabi__driver *drv;
    pthread_mutex_t lock;           /* guards bindings */
    binding *bindings;
} cuabi__multicast;

static void multicast_destroy(cuabi__object *o)
{
    cuabi__multicast *m = (cuabi__multicast *)o;
    const cuabi__driver *drv = m->drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* a release: the caller's back */
    if (m->ndevices)
        (void)cuabi__device_enter(&scope, m->devices[0], drv);
    while (m->bindings) {
        binding *b = m->bindings;
        m->bindings = b->next;
        if (drv->cuMulticastUnbind)
            (void)CUABI__CU_RELEASE(drv, cuMulticastUnbind, m->handle, b->device, b->mc_offset,
                                    b->size);
        (void)cuabi__buffer_mem_release(b->buffer, "cuabi_multicast_release");
        cuabi__free(b);
    }
    if (drv->cuMemRelease)
        (void)CUABI__CU_RELEASE(drv, cuMemRelease, m->handle);
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    for (size_t i = 0; i < m->ndevices; i++)
        cuabi__object_release(&m->devices[i]->base);
    cuabi__free(m->devices);
    pthread_mutex_destroy(&m->lock);
    cuabi__free(m);
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_supported(int *out, cuabi_device *device)
{
    cuabi__device *dev;
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(dev, device, DEVICE);
    CUABI__TRY(cuabi__driver_get(&drv));
    return CUABI__CU(drv, cuDeviceGetAttribute, out, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED,
                     dev->cu_device);
}

static cuabi_status granularity_of(size_t *out, const cuabi__driver *drv, size_t ndev,
                                   size_t size, CUmulticastGranularity_flags which,
                                   const char *caller)
{
    CUmulticastObjectProp prop;
    memset(&prop, 0, sizeof prop);
    prop.numDevices = (unsigned)ndev;
    prop.size = size;
    CUABI__TRY(CUABI__CU_IN(caller, drv, cuMulticastGetGranularity, out, &prop, which));
    if (*out == 0)
        return cuabi__error(CUABI_ERROR_CUDA, "%s: the driver gave a multicast granularity of 0",
                            caller);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_granularity(size_t *out, size_t num_devices,
                                                       size_t size, int recommended)
{
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__CHECK_ARG(num_devices > 0 && num_devices <= 1024,
                     "%s: num_devices %zu is not 1..1024", __func__, num_devices);
    CUABI__TRY(cuabi__driver_get(&drv));
    return granularity_of(out, drv, num_devices, size,
                          recommended ? CU_MULTICAST_GRANULARITY_RECOMMENDED
                                      : CU_MULTICAST_GRANULARITY_MINIMUM, __func__);
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_create(cuabi_multicast **out,
                                                  cuabi_device **devices, size_t count,
                                                  size_t size, cuabi_vmm_handle_type handle_type)
{
    const cuabi__driver *drv;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__CHECK_ARG(devices && count > 0 && count <= 1024,
                     "%s: a team is 1 to 1024 devices (%zu given%s)", __func__, count,
                     devices ? "" : ", NULL");
    CUABI__CHECK_ARG(size > 0, "%s: size is 0", __func__);
    CUABI__CHECK_ARG(handle_type == CUABI_VMM_HANDLE_NONE ||
                         handle_type == CUABI_VMM_HANDLE_POSIX_FD ||
                         handle_type == CUABI_VMM_HANDLE_FABRIC,
                     "%s: handle_type %d is not a cuabi_vmm_handle_type", __func__,
                     (int)handle_type);
    cuabi__device **team = cuabi__calloc(count, sizeof *team);
    if (!team)
        return CUABI_ERROR_OUT_OF_MEMORY;
    cuabi_status st = cuabi__driver_get(&drv);
    for (size_t i = 0; st == CUABI_SUCCESS && i < count; i++) {
        void *obj;
        st = cuabi__handle_get(devices[i], CUABI__T_DEVICE, &obj, __func__);
        if (st != CUABI_SUCCESS)
            break;
        team[i] = obj;
        for (size_t j = 0; j < i; j++)
            if (team[j]->cu_device == team[i]->cu_device)
                st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                                  "%s: device %d is in the team twice", __func__,
                                  team[i]->ordinal);
        if (st == CUABI_SUCCESS)
            st = cuabi__device_requires(drv, team[i], CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED,
                                        "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED",
                                        "multicast objects", __func__);
    }
    size_t gran = 0, rounded = 0;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    if (st == CUABI_SUCCESS)
        st = cuabi__device_enter(&scope, team[0], drv);
    if (st == CUABI_SUCCESS)
        st = granularity_of(&gran, drv, count, size, CU_MULTICAST_GRANULARITY_MINIMUM, __func__);
    if (st == CUABI_SUCCESS && !cuabi__size_round_up(&rounded, size, gran))
        st = cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                          "%s: %zu bytes rounded up to the granularity (%zu) overflow", __func__,
                          size, gran);
    cuabi__multicast *m = NULL;
    if (st == CUABI_SUCCESS && !(m = cuabi__calloc(1, sizeof *m)))
        st = CUABI_ERROR_OUT_OF_MEMORY;
    if (st != CUABI_SUCCESS) {
        cuabi__free(team);
        return cuabi__context_end(&scope, st);
    }
    CUmulticastObjectProp prop;
    memset(&prop, 0, sizeof prop);
    prop.numDevices = (unsigned)count;
    prop.size = rounded;
    prop.handleTypes = (unsigned long long)handle_type;
    st = CUABI__CU(drv, cuMulticastCreate, &m->handle, &prop);
    bool made = st == CUABI_SUCCESS;
    for (size_t i = 0; st == CUABI_SUCCESS && i < count; i++)
        st = CUABI__CU(drv, cuMulticastAddDevice, m->handle, team[i]->cu_device);
    if (st == CUABI_SUCCESS) {
        pthread_mutex_init(&m->lock, NULL);
        m->size = rounded;
        m->granularity = gran;
        m->devices = team;
        m->ndevices = count;
        m->drv = drv;
        st = cuabi__handle_register(&m->base, CUABI__T_MULTICAST, multicast_destroy);
        if (st == CUABI_SUCCESS) {
            for (size_t i = 0; i < count; i++)
                cuabi__object_retain(&team[i]->base);
            *out = CUABI__HANDLE(m, cuabi_multicast);
            return CUABI__CONTEXT_END_OUT(&scope, st, out, MULTICAST, __func__);
        }
        pthread_mutex_destroy(&m->lock);
    }
    if (made)
        (void)CUABI__CU_RELEASE(drv, cuMemRelease, m->handle);
    cuabi__free(m);
    cuabi__free(team);
    return cuabi__context_end(&scope, st);
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_size(size_t *out, cuabi_multicast *multicast)
{
    cuabi__multicast *m;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = 0;
    CUABI__GET(m, multicast, MULTICAST);
    *out = m->size;
    return CUABI_SUCCESS;
}

/* The buffer, its device in the team, the ranges on both sides inside
 * their objects and multiples of the granularity. */
static cuabi_status bind_begin(cuabi__context_scope *scope, cuabi__multicast **m, cuabi__buffer **b,
                               cuabi_multicast *multicast, size_t mc_offset, cuabi_buffer *buffer,
                               size_t offset, size_t size, const char *caller)
{
    void *obj;
    CUABI__TRY(cuabi__handle_get(multicast, CUABI__T_MULTICAST, &obj, caller));
    *m = obj;
    CUABI__TRY(cuabi__handle_get(buffer, CUABI__T_BUFFER, &obj, caller));
    *b = obj;
    cuabi__multicast *mc = *m;
    if (!(*b)->device || (*b)->kind != CUABI_MEMORY_DEVICE)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: only device memory binds to a multicast object", caller);
    bool member = false;
    for (size_t i = 0; i < mc->ndevices; i++)
        member |= mc->devices[i]->cu_device == (*b)->device->cu_device;
    if (!member)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: the buffer's device %d is not in the multicast team", caller,
                            (*b)->device->ordinal);
    size_t g = mc->granularity;
    if (size == 0 || mc_offset % g || offset % g || size % g)
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: offsets and size (%zu, %zu, %zu) must be non-zero multiples of "
                            "the multicast granularity (%zu bytes)", caller, mc_offset, offset,
                            size, g);
    if (!cuabi__range_inside(mc_offset, size, mc->size))
        return cuabi__error(CUABI_ERROR_INVALID_ARGUMENT,
                            "%s: %zu bytes at %zu run past the multicast object (%zu bytes)",
                            caller, size, mc_offset, mc->size);
    CUABI__TRY(cuabi__buffer_check_range(*b, offset, size, "bound", caller));
    return cuabi__device_enter(scope, (*b)->device, mc->drv);
}

/* Remember a binding made (the buffer's memory stays while bound). */
static cuabi_status bind_note(cuabi__multicast *m, cuabi__buffer *b, size_t mc_offset,
                              size_t size, const char *caller)
{
    binding *n = cuabi__calloc(1, sizeof *n);
    if (!n) {
        (void)CUABI__CU_RELEASE(m->drv, cuMulticastUnbind, m->handle, b->device->cu_device,
                                mc_offset, size);
        return cuabi__error(CUABI_ERROR_OUT_OF_MEMORY, "%s: out of host memory", caller);
    }
    cuabi__buffer_mem_retain(b);
    n->device = b->device->cu_device;
    n->mc_offset = mc_offset;
    n->size = size;
    n->buffer = b;
    pthread_mutex_lock(&m->lock);
    n->next = m->bindings;
    m->bindings = n;
    pthread_mutex_unlock(&m->lock);
    return CUABI_SUCCESS;
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_bind_memory(cuabi_multicast *multicast,
                                                       size_t mc_offset, cuabi_buffer *buffer,
                                                       size_t offset, size_t size)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__multicast *m;
    cuabi__buffer *b;
    CUABI__TRY_SCOPE(bind_begin(&scope, &m, &b, multicast, mc_offset, buffer, offset, size, __func__));
    CUmemGenericAllocationHandle h;
    size_t in_chunk;
    CUABI__TRY_SCOPE(cuabi__vmm_chunk_at(&h, &in_chunk, b, offset, size, __func__));
    CUABI__TRY_SCOPE(CUABI__CU(m->drv, cuMulticastBindMem, m->handle, mc_offset, h, in_chunk, size, 0));
    scope_st = bind_note(m, b, mc_offset, size, __func__);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_bind_buffer(cuabi_multicast *multicast,
                                                       size_t mc_offset, cuabi_buffer *buffer,
                                                       size_t offset, size_t size)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__multicast *m;
    cuabi__buffer *b;
    CUABI__TRY_SCOPE(bind_begin(&scope, &m, &b, multicast, mc_offset, buffer, offset, size, __func__));
    CUABI__TRY_SCOPE(CUABI__CU(m->drv, cuMulticastBindAddr, m->handle, mc_offset,
                         (CUdeviceptr)(b->ptr + offset), size, 0));
    scope_st = bind_note(m, b, mc_offset, size, __func__);
scope_leave:
    return cuabi__context_end(&scope, scope_st);
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_unbind(cuabi_multicast *multicast,
                                                  cuabi_device *device, size_t mc_offset)
{
    cuabi__multicast *m;
    cuabi__device *dev;
    CUABI__GET(m, multicast, MULTICAST);
    CUABI__GET(dev, device, DEVICE);
    pthread_mutex_lock(&m->lock);
    binding **link = &m->bindings;
    while (*link && ((*link)->device != dev->cu_device || (*link)->mc_offset != mc_offset))
        link = &(*link)->next;
    binding *b = *link;
    if (b)
        *link = b->next;
    pthread_mutex_unlock(&m->lock);
    if (!b)
        return cuabi__error(CUABI_ERROR_NOT_FOUND,
                            "%s: nothing of device %d is bound at offset %zu", __func__,
                            dev->ordinal, mc_offset);
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status st = cuabi__device_enter(&scope, dev, m->drv);
    if (st == CUABI_SUCCESS)
        st = CUABI__CU_RELEASE_IN(__func__, m->drv, cuMulticastUnbind, m->handle, b->device,
                                  b->mc_offset, b->size);
    st = cuabi__context_end(&scope, st);
    if (st != CUABI_SUCCESS) {   /* still bound: keep the record */
        pthread_mutex_lock(&m->lock);
        b->next = m->bindings;
        m->bindings = b;
        pthread_mutex_unlock(&m->lock);
        return st;
    }
    (void)cuabi__buffer_mem_release(b->buffer, __func__);
    cuabi__free(b);
    return CUABI_SUCCESS;
}

/* A mapping's state: the object and the range, freed with the buffer. */
typedef struct mapping {
    cuabi__multicast *m;
    CUdeviceptr base;
} mapping;

static void mapping_release(uintptr_t ptr, size_t size, void *payload)
{
    (void)ptr;
    mapping *p = payload;
    const cuabi__driver *drv = p->m->drv;
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;   /* a release: the caller's back */
    if (cuabi__device_enter(&scope, p->m->devices[0], drv) == CUABI_SUCCESS &&
        drv->cuCtxSynchronize)
        (void)drv->cuCtxSynchronize();
    if (drv->cuMemUnmap)
        (void)CUABI__CU_RELEASE(drv, cuMemUnmap, p->base, size);
    if (drv->cuMemAddressFree)
        (void)CUABI__CU_RELEASE(drv, cuMemAddressFree, p->base, size);
    (void)cuabi__context_end(&scope, CUABI_SUCCESS);
    cuabi__object_release(&p->m->base);
    cuabi__free(p);
}

CUABI_EXTERN(cuabi_status) cuabi_multicast_map(cuabi_buffer **out, cuabi_multicast *multicast)
{
    cuabi__context_scope scope = CUABI__CONTEXT_SCOPE_NONE;
    cuabi_status scope_st = CUABI_SUCCESS;
    cuabi__multicast *m;
    CUABI__CHECK_ARG(out, "%s: out is NULL", __func__);
    *out = NULL;
    CUABI__GET(m, multicast, MULTICAST);
    const cuabi__driver *drv = m->drv;
    CUABI__TRY_SCOPE(cuabi__device_enter(&scope, m->devices[0], drv));
    mapping *p = cuabi__calloc(1, sizeof *p);
    CUmemAccessDesc *access = cuabi__calloc(m->ndevices, sizeof *access);
    if (!p || !access) {
        cuabi__free(p);
        cuabi__free(access);
        CUABI__SCOPE_RETURN(CUABI_ERROR_OUT_OF_MEMORY);
    }
    for (size_t i = 0; i < m->ndevices; i++) {
        access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[i].location.id = m->devices[i]->cu_device;
        access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    CUdeviceptr base = 0;
    bool reserved = false, mapped = false;
    cuabi_status st = CUABI__CU(drv, cuMemAddressReserve, &base, m->size, m->granularity, 0, 0);
    reserved = st == CUABI_SUCCESS;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuMemMap, base, m->size, 0, m->handle, 0);
    mapped = reserved && st == CUABI_SUCCESS;
    if (st == CUABI_SUCCESS)
        st = CUABI__CU(drv, cuMemSetAccess, base, m->size, access, m->ndevices);
    cuabi__free(access);
    if (st == CUABI_SUCCESS) {
        p->m = m;
        p->base = base;
        cuabi__object_retain(&m->base);
        st = cuabi_buffer_wrap(out, CUABI__HANDLE(m->devices[0], cuabi_device),
                               CUABI_MEMORY_DEVICE, (uintptr_t)base, m->size, mapping_release, p);
        if (st == CUABI_SUCCESS)
            CUABI__SCOPE_RETURN(CUABI_SUCCESS);
        cuabi__object_release(&m->base);
    }
    if (mapped)
        (void)CUABI__CU_RELEASE(drv, cuMemUnmap, base, m->size);
    if (reserved)
        (void)CUABI__CU_RELEASE(drv, cuMemAddressFree, base, m->size);
    cuabi__free(p);
    CUABI__SCOPE_RETURN(st);
scope_leave:
    return CUABI__CONTEXT_END_OUT(&scope, scope_st, out, BUFFER, __func__);
}
