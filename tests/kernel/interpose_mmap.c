/*
 * Test seam: run code between libhp's probe and its mmap. libhp.so calls
 * mmap64 (or mmap) through the PLT, so this program's definitions win.
 * This file must not include <sys/mman.h>, whose redirects would rename the
 * definitions; it calls the kernel directly.
 */
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Called before every mmap when set; the test's hook decides what to do. */
void (*kt_mmap_hook)(size_t len, int flags);

void *mmap(void *addr, size_t len, int prot, int flags, int fd, long off);
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, long off);

void *mmap(void *addr, size_t len, int prot, int flags, int fd, long off)
{
    void (*hook)(size_t, int) = kt_mmap_hook;
    if (hook)
        hook(len, flags);
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, long off)
{
    return mmap(addr, len, prot, flags, fd, off);
}
