/* DLPack declarations for cuabi's public API (hand-written, not generated).
 *
 * Includes <dlpack/dlpack.h>. When that header is older than DLPack 1.0
 * (Debian's libdlpack-dev is 0.6, which has only the legacy structs), the
 * 1.x versioned types are declared here from the DLPack specification, with
 * the same layout on every platform the spec targets:
 *
 *   DLPackVersion             { uint32 major @0, uint32 minor @4 }       8 bytes
 *   DLManagedTensorVersioned  { version @0, manager_ctx @8, deleter @16,
 *                               uint64 flags @24, DLTensor dl_tensor @32 } 80 bytes (LP64)
 *
 * Before DLPack 1.3, the C exchange API's types (DLPackExchangeAPI and its
 * function types) are declared here the same way.
 *
 * The data type and device codes added after 0.6 (bool, float8, ...) are
 * available as cuabi_dtype_code / cuabi_dlpack_device_type in cuabi/view.h.
 */
#ifndef CUABI_DLPACK_H
#define CUABI_DLPACK_H

#include <stdint.h>
#include <dlpack/dlpack.h>

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1

#ifdef __cplusplus
extern "C" {
#endif

/** Set when this header declared the DLPack 1.x types itself. */
#define CUABI_DLPACK_VERSIONED_DECLARED 1

/** The DLPack ABI version of a DLManagedTensorVersioned. */
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/** A versioned, managed DLTensor (DLPack 1.x). */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif

#endif /* DLPack older than 1.0 */

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1 || \
    (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 3)

#ifdef __cplusplus
extern "C" {
#endif

/** Set when this header declared the DLPack 1.3 C exchange API itself. */
#define CUABI_DLPACK_EXCHANGE_DECLARED 1

/* The DLPack C exchange API (DLPack 1.3): a table of C functions a Python
 * array type publishes as `__dlpack_c_exchange_api__` (a capsule named
 * "dlpack_exchange_api"; older producers: an int `__c_dlpack_exchange_api__`).
 * The functions taking or giving a PyObject* (as void *) need the GIL and
 * return -1 with a Python exception set on failure. */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*SetError)(void *error_ctx, const char *kind, const char *message));
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object,
                                                     DLManagedTensorVersioned **out);
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void **out_current_stream);
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor,
                                                   void **out_py_object);

/** The stable head of every exchange table: consumers check `version.major`
 * and may walk `prev_api` to an older table they know. */
typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

/** A producer's exchange table (major version 1). */
typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    DLPackManagedTensorAllocator managed_tensor_allocator;
    DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
    DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
    DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync; /**< May be NULL. */
    DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif

#endif /* DLPack older than 1.3 */

#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_COPIED
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif

#endif /* CUABI_DLPACK_H */
