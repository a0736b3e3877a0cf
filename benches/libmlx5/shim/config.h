/*
 * Minimal stand-in for the config.h that rdma-core's CMake build generates
 * from buildlib/config.h.in.  Only what the private headers used by
 * harness.c (providers/mlx5/mlx5.h, libibverbs/driver.h, util/ headers) need,
 * with the values a Debian 12 amd64 build of rdma-core 44.0 gets
 * (IOCTL_MODE "both" -> 3, 64-bit long, GCC attributes available).
 * No path/daemon settings: the harness never uses them.
 */
#ifndef CONFIG_H_IN
#define CONFIG_H_IN

#define HAVE_STATEMENT_EXPR 1
#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1
#define HAVE_TYPEOF 1
#define HAVE_ISBLANK 1
#define HAVE_BUILTIN_CLZ 1
#define HAVE_BUILTIN_CLZL 1

#define PACKAGE_VERSION "44.0"
#define STREAM_CLOEXEC "e"
#define RDMA_CDEV_DIR "/dev/infiniband"
#define IBVERBS_PABI_VERSION 34

#define HAVE_FUNC_ATTRIBUTE_ALWAYS_INLINE 1
#define HAVE_FUNC_ATTRIBUTE_IFUNC 1
#define HAVE_FUNC_ATTRIBUTE_SYMVER 1
#define HAVE_WORKING_IF_H 1
#define HAVE_FULL_SYMBOL_VERSIONS 1

#define SIZEOF_LONG 8

#define VERBS_IOCTL_ONLY 0
#define VERBS_WRITE_ONLY 0

#endif
