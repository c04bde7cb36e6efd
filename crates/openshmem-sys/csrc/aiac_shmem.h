/* aiac's shim over <shmem.h>: the values the header defines as macros (or, depending on the
 * implementation, as enumerators) exported as typed constants, so that Rust reads the installed
 * library's own values instead of copies of them. bindgen generates bindings for this header,
 * which includes <shmem.h> itself. */
#ifndef AIAC_SHMEM_H
#define AIAC_SHMEM_H

#include <shmem.h>

/* Collective work arrays (OpenSHMEM 1.4, 9.9). */
extern const long AIAC_SHMEM_SYNC_VALUE;
extern const long AIAC_SHMEM_BARRIER_SYNC_SIZE;
extern const long AIAC_SHMEM_BCAST_SYNC_SIZE;
extern const long AIAC_SHMEM_COLLECT_SYNC_SIZE;
extern const long AIAC_SHMEM_REDUCE_SYNC_SIZE;
extern const long AIAC_SHMEM_REDUCE_MIN_WRKDATA_SIZE;

/* Point-to-point comparison operators (9.10). */
extern const int AIAC_SHMEM_CMP_EQ;
extern const int AIAC_SHMEM_CMP_NE;
extern const int AIAC_SHMEM_CMP_GT;
extern const int AIAC_SHMEM_CMP_GE;
extern const int AIAC_SHMEM_CMP_LT;
extern const int AIAC_SHMEM_CMP_LE;

/* Thread levels (9.2.2). */
extern const int AIAC_SHMEM_THREAD_SINGLE;
extern const int AIAC_SHMEM_THREAD_FUNNELED;
extern const int AIAC_SHMEM_THREAD_SERIALIZED;
extern const int AIAC_SHMEM_THREAD_MULTIPLE;

/* The specification version the header declares. */
extern const int AIAC_SHMEM_MAJOR_VERSION;
extern const int AIAC_SHMEM_MINOR_VERSION;

#endif
