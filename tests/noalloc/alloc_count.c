/* alloc_count.c - an LD_PRELOAD shim that counts the heap allocations the main executable itself makes
 *
 * Build: cc -O2 -shared -fPIC -o alloc_count.so tests/noalloc/alloc_count.c -ldl
 * Use:   ALLOC_COUNT_OUT=PREFIX LD_PRELOAD=./alloc_count.so build/ringside train ...
 *
 * Every malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and valloc whose
 * immediate caller (__builtin_return_address(0)) lies in the main executable's loaded segments
 * is counted; calls from shared libraries (libzmq's per-message buffers, libc's own strdup or
 * fopen, cJSON, OpenBLAS) are not: the question is whether our code allocates, not what the
 * libraries do underneath. At exit the process writes PREFIX.PID:
 *
 *     exe N          allocations called from the executable
 *     all M          allocations from anywhere (for information)
 *     site OFFSET C  per call site in the executable: its offset from the executable's load
 *                    address (addr2line -e EXE -f OFFSET names it) and its count
 *     lib FILE FUNCTION C  per calling function in a shared library (dladdr), for information
 *
 * A forked child inherits LD_PRELOAD through exec and writes its own file (its own pid). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSEG 16
#define NSITES 4096

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);

static uintptr_t seg_lo[NSEG], seg_hi[NSEG], exe_base;
static int nseg, ready;
static atomic_long n_exe, n_all;
static _Atomic uintptr_t site_pc[NSITES];
static atomic_long site_n[NSITES];

/* dlsym may allocate (calloc) before the real functions are known: a small bump arena serves it */
static char boot[8192];
static size_t boot_used;

static void *boot_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof boot) return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

static int is_boot(const void *p) { return (const char *)p >= boot && (const char *)p < boot + sizeof boot; }

static int find_exe(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    /* the first object is the main program */
    exe_base = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum && nseg < NSEG; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        seg_lo[nseg] = info->dlpi_addr + ph->p_vaddr;
        seg_hi[nseg] = seg_lo[nseg] + ph->p_memsz;
        nseg++;
    }
    return 1;
}

static void init(void) {
    static int busy;
    if (ready || busy) return;
    busy = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    dl_iterate_phdr(find_exe, NULL);
    ready = 1;
    busy = 0;
}

static void count(void *pc) {
    atomic_fetch_add_explicit(&n_all, 1, memory_order_relaxed);
    uintptr_t a = (uintptr_t)pc;
    int in = 0;
    for (int i = 0; i < nseg; i++)
        if (a >= seg_lo[i] && a < seg_hi[i]) in = 1;
    if (in) atomic_fetch_add_explicit(&n_exe, 1, memory_order_relaxed);
    for (size_t h = (a >> 2) * 2654435761u % NSITES, k = 0; k < NSITES; k++, h = (h + 1) % NSITES) {
        uintptr_t cur = atomic_load_explicit(&site_pc[h], memory_order_relaxed);
        if (cur == 0) {
            uintptr_t zero = 0;
            if (!atomic_compare_exchange_strong(&site_pc[h], &zero, a) && zero != a) continue;
            cur = a;
        }
        if (cur == a) {
            atomic_fetch_add_explicit(&site_n[h], 1, memory_order_relaxed);
            return;
        }
    }
}

void *malloc(size_t n) {
    if (!ready) {
        init();
        if (!real_malloc) return boot_alloc(n);
    }
    count(__builtin_return_address(0));
    return real_malloc(n);
}

void *calloc(size_t a, size_t b) {
    if (!ready) {
        init();
        if (!real_calloc) return boot_alloc(a * b); /* the arena is zero */
    }
    count(__builtin_return_address(0));
    return real_calloc(a, b);
}

void *realloc(void *p, size_t n) {
    if (!ready) init();
    count(__builtin_return_address(0));
    if (is_boot(p)) {
        void *q = real_malloc(n);
        if (q) memcpy(q, p, n < sizeof boot - (size_t)((char *)p - boot) ? n : sizeof boot - (size_t)((char *)p - boot));
        return q;
    }
    return real_realloc(p, n);
}

void free(void *p) {
    static void (*real_free)(void *);
    if (!p || is_boot(p)) return;
    if (!real_free) real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_free(p);
}

int posix_memalign(void **out, size_t al, size_t n) {
    if (!ready) init();
    count(__builtin_return_address(0));
    return real_posix_memalign(out, al, n);
}

void *aligned_alloc(size_t al, size_t n) {
    if (!ready) init();
    count(__builtin_return_address(0));
    return real_aligned_alloc(al, n);
}

void *memalign(size_t al, size_t n) {
    if (!ready) init();
    count(__builtin_return_address(0));
    return real_memalign(al, n);
}

void *valloc(size_t n) {
    if (!ready) init();
    count(__builtin_return_address(0));
    return real_valloc(n);
}

__attribute__((destructor)) static void report(void) {
    const char *prefix = getenv("ALLOC_COUNT_OUT");
    if (!prefix || !*prefix) return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%ld", prefix, (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "exe %ld\nall %ld\n", atomic_load(&n_exe), atomic_load(&n_all));
    for (int h = 0; h < NSITES; h++) {
        uintptr_t a = site_pc[h];
        if (!a) continue;
        int in = 0;
        for (int i = 0; i < nseg; i++)
            if (a >= seg_lo[i] && a < seg_hi[i]) in = 1;
        Dl_info d;
        if (in) fprintf(f, "site 0x%lx %ld\n", (unsigned long)(a - exe_base), atomic_load(&site_n[h]));
        else if (dladdr((void *)a, &d))
            fprintf(f, "lib %s %s %ld\n", d.dli_fname && *d.dli_fname ? strrchr(d.dli_fname, '/') ? strrchr(d.dli_fname, '/') + 1 : d.dli_fname : "?",
                    d.dli_sname ? d.dli_sname : "?", atomic_load(&site_n[h]));
    }
    fclose(f);
}
