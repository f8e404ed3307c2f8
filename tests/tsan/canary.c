/* canary.c - a deliberate data race: proves the ThreadSanitizer check sees races before it calls a run clean */
#include <pthread.h>
#include <stdio.h>

static int shared_counter; /* written by two threads without a lock: the race ThreadSanitizer must report */

static void *canary_bump(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) shared_counter++;
    return NULL;
}

int main(void) {
    pthread_t a, b;
    if (pthread_create(&a, NULL, canary_bump, NULL) || pthread_create(&b, NULL, canary_bump, NULL)) return 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%d\n", shared_counter);
    return 0;
}
