/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/rank/program.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/limits.h"

int gs_program_resolve(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    struct stat st;
    if (strchr(name, '/') != NULL) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -ENOENT;
    }
    for (const char *p = path != NULL ? path : "/usr/bin:/bin"; *p != '\0';) {
        size_t n = strcspn(p, ":");
        if ((size_t)snprintf(out, len, "%.*s/%s", (int)n, n > 0 ? p : ".", name) < len &&
            stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) {
            return 0;
        }
        p += n + (p[n] == ':');
    }
    return -ENOENT;
}

int gs_program_exec(char *const argv[])
{
    char file[GS_PATH_MAX];
    int denied = 0;
    if (strchr(argv[0], '/') != NULL) {
        execv(argv[0], argv);
        return errno;
    }
    const char *path = getenv("PATH");
    for (const char *p = path != NULL ? path : "/usr/bin:/bin"; *p != '\0';) {
        size_t n = strcspn(p, ":");
        if ((size_t)snprintf(file, sizeof(file), "%.*s/%s", (int)n, n > 0 ? p : ".", argv[0]) <
            sizeof(file)) {
            execv(file, (char *const *)argv);
            /* As execvp: a directory of PATH that has no such program, or
             * is not there, is passed; a file found but not runnable
             * (ENOEXEC included) ends the search. */
            if (errno == EACCES) {
                denied = 1;
            } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE) {
                return errno;
            }
        }
        p += n + (p[n] == ':');
    }
    return denied ? EACCES : ENOENT;
}

static int mpi_name(const char *lib)
{
    static const char *const prefixes[] = {"libmpi.", "libmpi_", "libmpich", "libmpifort",
                                           "libmpicxx", "libmpi_cxx", NULL};
    for (const char *const *p = prefixes; *p != NULL; p++) {
        if (strncmp(lib, *p, strlen(*p)) == 0) {
            return 1;
        }
    }
    return 0;
}

/* pread of exactly len bytes at off: 0 or -1. */
static int read_at(int fd, void *buf, size_t len, off_t off)
{
    return pread(fd, buf, len, off) == (ssize_t)len ? 0 : -1;
}

/* The file offset of virtual address addr, from the loadable segments. */
static off_t file_offset(const Elf64_Phdr *ph, int n, Elf64_Addr addr)
{
    for (int i = 0; i < n; i++) {
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr &&
            addr < ph[i].p_vaddr + ph[i].p_filesz) {
            return (off_t)(ph[i].p_offset + (addr - ph[i].p_vaddr));
        }
    }
    return -1;
}

/* The dynamic section's needed names, checked; 1, 0 or -1 as above. */
static int scan_needed(int fd, const Elf64_Ehdr *eh)
{
    Elf64_Phdr ph[64];
    Elf64_Dyn dyn[512];
    int nph = eh->e_phnum, ndyn = 0, rc = 0;
    Elf64_Addr strtab = 0;
    if (nph <= 0 || nph > 64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        read_at(fd, ph, (size_t)nph * sizeof(Elf64_Phdr), (off_t)eh->e_phoff) != 0) {
        return -1;
    }
    for (int i = 0; i < nph; i++) {
        if (ph[i].p_type == PT_DYNAMIC) {
            ndyn = (int)(ph[i].p_filesz / sizeof(Elf64_Dyn));
            ndyn = ndyn > 512 ? 512 : ndyn;
            if (read_at(fd, dyn, (size_t)ndyn * sizeof(Elf64_Dyn), (off_t)ph[i].p_offset) != 0) {
                return -1;
            }
        }
    }
    if (ndyn == 0) {
        return -1; /* static: MPI may be inside */
    }
    for (int i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
        if (dyn[i].d_tag == DT_STRTAB) {
            strtab = dyn[i].d_un.d_ptr;
        }
    }
    off_t base = strtab != 0 ? file_offset(ph, nph, strtab) : -1;
    if (base < 0) {
        return -1;
    }
    for (int i = 0; i < ndyn && dyn[i].d_tag != DT_NULL && rc == 0; i++) {
        char lib[128] = "";
        if (dyn[i].d_tag == DT_NEEDED) {
            ssize_t n = pread(fd, lib, sizeof(lib) - 1, base + (off_t)dyn[i].d_un.d_val);
            lib[n > 0 ? n : 0] = '\0';
            rc = mpi_name(lib);
        }
    }
    return rc;
}

static int little_endian(void)
{
    const unsigned short one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Programs that run another program or a script (an interpreter, a
 * wrapper): what they run is unknown here. */
static int runs_another(const char *path)
{
    static const char *const names[] = {
        "python", "perl", "ruby", "julia", "R", "Rscript", "node", "java", "lua", "tclsh",
        "octave", "matlab", "bash", "sh", "dash", "zsh", "ksh", "csh", "tcsh", "env", "nice",
        "taskset", "numactl", "hwloc-bind", "time", "timeout", "stdbuf", "valgrind", "gdb",
        "nsys", "ncu", "strace", "ltrace", "apptainer", "singularity", "podman", "docker",
        "srun", "mpirun", "mpiexec", "gsrun", NULL};
    const char *slash = strrchr(path, '/'), *base = slash != NULL ? slash + 1 : path;
    for (const char *const *n = names; *n != NULL; n++) {
        size_t len = strlen(*n);
        /* python3, python3.11, perl5.36: the name and a version. */
        if (strncmp(base, *n, len) == 0 &&
            (base[len] == '\0' || ((base[len] >= '0' && base[len] <= '9') || base[len] == '.'))) {
            return 1;
        }
    }
    return 0;
}

int gs_program_links_mpi(const char *path)
{
    if (runs_another(path)) {
        return -1;
    }
    Elf64_Ehdr eh;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int rc = -1;
    if (read_at(fd, &eh, sizeof(eh), 0) == 0 && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_ident[EI_DATA] == (little_endian() ? ELFDATA2LSB : ELFDATA2MSB)) {
        rc = scan_needed(fd, &eh);
    }
    close(fd);
    return rc;
}
