/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/service/lister.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/core/proc.h"

struct gs_lister {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int want, stop, ended;
    long long listed_ms; /* 0: none yet */
    long long since_ms;  /* when the listing under way began; 0: none runs */
    gs_gpu_list_t latest, work;
};

static void *run(void *arg)
{
    gs_lister_t *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->want && !l->stop) {
            pthread_cond_wait(&l->wake, &l->mu);
        }
        if (l->stop) {
            break;
        }
        l->want = 0;
        l->since_ms = gs_proc_now_ms();
        pthread_mutex_unlock(&l->mu);
        gs_error_t err;
        if (gs_gpu_discover(&l->work, &err) != 0) {
            memset(&l->work, 0, sizeof(l->work));
            snprintf(l->work.reason, sizeof(l->work.reason), "%s", err.text);
        }
        pthread_mutex_lock(&l->mu);
        l->latest = l->work;
        l->listed_ms = gs_proc_now_ms();
        l->since_ms = 0;
    }
    l->ended = 1;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

gs_lister_t *gs_lister_start(void)
{
    gs_lister_t *l = calloc(1, sizeof(*l));
    sigset_t all, old;
    if (l == NULL) {
        return NULL;
    }
    gs_gpu_hold();
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->wake, NULL);
    /* No signal for this thread: the agent reads them from its signalfd. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&l->thread, NULL, run, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->wake);
        free(l);
        return NULL;
    }
    return l;
}

long long gs_lister_get(gs_lister_t *l, gs_gpu_list_t *out, int fresh_ms)
{
    long long age = -1, now = gs_proc_now_ms();
    pthread_mutex_lock(&l->mu);
    if (l->listed_ms > 0) {
        age = now - l->listed_ms;
        *out = l->latest;
    }
    if (age < 0 || age > fresh_ms) {
        l->want = 1;
        pthread_cond_signal(&l->wake);
    }
    pthread_mutex_unlock(&l->mu);
    return age;
}

long long gs_lister_busy_ms(gs_lister_t *l)
{
    if (l == NULL) {
        return 0;
    }
    pthread_mutex_lock(&l->mu);
    long long since = l->since_ms;
    pthread_mutex_unlock(&l->mu);
    return since > 0 ? gs_proc_now_ms() - since : 0;
}

int gs_lister_stop(gs_lister_t *l, int bound_ms)
{
    if (l == NULL) {
        return 0;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* pthread_cond_timedwait's clock */
    until.tv_sec += bound_ms / 1000;
    until.tv_nsec += (long)(bound_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->wake);
    while (!l->ended && pthread_cond_timedwait(&l->wake, &l->mu, &until) == 0) {
    }
    int ended = l->ended;
    pthread_mutex_unlock(&l->mu);
    if (!ended) {
        /* In NVML past the bound: the agent's servers are not kept for it.
         * It keeps l; the process's end takes both. */
        pthread_detach(l->thread);
        return -ETIMEDOUT;
    }
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->wake);
    free(l);
    return 0;
}
