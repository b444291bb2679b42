/* SPDX-License-Identifier: BSD-3-Clause */
/* What each step of a node agent's start costs on this machine (not run by
 * CI; tests/gpu/startup_steps.sh builds and runs it):
 *
 *   startup_steps [CONTROL]
 *
 * Times (ms) the NVML calls gsrun's GPU discovery makes, on GPU 0, and with
 * CONTROL (nvidia-cuda-mps-control) one MPS daemon's start as the agent
 * makes it: spawn to control socket, start_server, get_server_list right
 * after (the server is setting up its GPU context) and again, quit until the
 * daemon is gone. The daemon has private pipe and log dirs, removed after. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double t_last;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void step(const char *what, int rc)
{
    double t = now_ms();
    printf("%-32s %8.2f ms%s\n", what, t - t_last, rc == 0 ? "" : "  (failed)");
    t_last = now_ms();
}

static void *sym(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (f == NULL) {
        fprintf(stderr, "startup_steps: libnvidia-ml.so.1 has no %s\n", name);
        exit(1);
    }
    return f;
}

static int nvml_steps(void)
{
    typedef int (*f_void)(void);
    typedef int (*f_uint)(void *, unsigned *);
    char text[256], pci[512];
    unsigned count = 0, a = 0, b = 0;
    unsigned long mask[16];
    void *dev = NULL;

    t_last = now_ms();
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    step("dlopen libnvidia-ml.so.1", lib == NULL);
    if (lib == NULL) {
        return 1;
    }
    f_void init = (f_void)sym(lib, "nvmlInit_v2"), shut = (f_void)sym(lib, "nvmlShutdown");
    int (*get_count)(unsigned *) = (int (*)(unsigned *))sym(lib, "nvmlDeviceGetCount_v2");
    int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))sym(lib, "nvmlDeviceGetHandleByIndex_v2");
    int (*uuid)(void *, char *, unsigned) = (int (*)(void *, char *, unsigned))sym(lib, "nvmlDeviceGetUUID");
    int (*name)(void *, char *, unsigned) = (int (*)(void *, char *, unsigned))sym(lib, "nvmlDeviceGetName");
    int (*affinity)(void *, unsigned, unsigned long *) =
        (int (*)(void *, unsigned, unsigned long *))sym(lib, "nvmlDeviceGetCpuAffinity");
    int (*pci_info)(void *, void *) = (int (*)(void *, void *))sym(lib, "nvmlDeviceGetPciInfo_v3");
    int (*mig)(void *, unsigned *, unsigned *) = (int (*)(void *, unsigned *, unsigned *))sym(lib, "nvmlDeviceGetMigMode");
    f_uint mig_max = (f_uint)sym(lib, "nvmlDeviceGetMaxMigDeviceCount");
    f_uint mode = (f_uint)sym(lib, "nvmlDeviceGetComputeMode");

    step("nvmlInit_v2", init());
    step("nvmlDeviceGetCount_v2", get_count(&count));
    if (count == 0 || handle(0, &dev) != 0) {
        step("nvmlDeviceGetHandleByIndex_v2", 1);
        return 1;
    }
    step("nvmlDeviceGetHandleByIndex_v2", 0);
    step("nvmlDeviceGetUUID", uuid(dev, text, sizeof(text)));
    step("nvmlDeviceGetName", name(dev, text, sizeof(text)));
    step("nvmlDeviceGetCpuAffinity", affinity(dev, 16, mask));
    step("nvmlDeviceGetPciInfo_v3", pci_info(dev, pci));
    step("nvmlDeviceGetMigMode", mig(dev, &a, &b));
    step("nvmlDeviceGetMaxMigDeviceCount", mig_max(dev, &a));
    step("nvmlDeviceGetComputeMode", mode(dev, &a));
    step("nvmlShutdown", shut());
    return 0;
}

/* One control command through a client, as the agent sends it. */
static int command(const char *control, const char *cmd)
{
    char line[512];
    snprintf(line, sizeof(line), "echo '%s' | '%s' >/dev/null", cmd, control);
    return system(line) == 0 ? 0 : 1;
}

static int mps_steps(const char *control)
{
    char dir[] = "/tmp/gs-steps.XXXXXX", pipe_dir[64], log_dir[64], sock[80], cmd[128];
    struct stat st;
    int rc = 0, status;

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(pipe_dir, sizeof(pipe_dir), "%s/p", dir);
    snprintf(log_dir, sizeof(log_dir), "%s/l", dir);
    snprintf(sock, sizeof(sock), "%s/control", pipe_dir);
    if (mkdir(pipe_dir, 0700) != 0 || mkdir(log_dir, 0700) != 0) {
        perror("mkdir");
        return 1;
    }
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
    setenv("CUDA_MPS_LOG_DIRECTORY", log_dir, 1);
    t_last = now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL || freopen("/dev/null", "w", stderr) == NULL) {
            _exit(126);
        }
        execlp(control, control, "-f", (char *)NULL);
        _exit(127);
    }
    double deadline = now_ms() + 10000;
    while (stat(sock, &st) != 0 && now_ms() < deadline && waitpid(pid, &status, WNOHANG) == 0) {
        usleep(200);
    }
    if (stat(sock, &st) != 0) {
        step("control daemon: socket", 1);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        rc = 1;
    } else {
        step("control daemon: socket", 0);
        snprintf(cmd, sizeof(cmd), "start_server -uid %u", (unsigned)getuid());
        step("start_server", command(control, cmd));
        step("get_server_list (server starting)", command(control, "get_server_list"));
        step("get_server_list (again)", command(control, "get_server_list"));
        int q = command(control, "quit");
        waitpid(pid, &status, 0);
        step("quit, until the daemon is gone", q);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? rc : 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = nvml_steps();
    if (argc > 1) {
        rc |= mps_steps(argv[1]);
    }
    return rc;
}
