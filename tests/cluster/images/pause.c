/* The pod sandbox's pause process, as Kubernetes' build/pause/linux/pause.c: holds the pod's
 * namespaces, reaps orphaned children, and exits on SIGINT or SIGTERM. Built static by images.sh. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void sigdown(int signo) {
  psignal(signo, "Shutting down, got signal");
  exit(0);
}

static void sigreap(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction down = {.sa_handler = sigdown};
  struct sigaction reap = {.sa_handler = sigreap, .sa_flags = SA_NOCLDSTOP};
  if (getpid() != 1) {
    fprintf(stderr, "Warning: pause should be the first process\n");
  }
  if (sigaction(SIGINT, &down, NULL) < 0 || sigaction(SIGTERM, &down, NULL) < 0 ||
      sigaction(SIGCHLD, &reap, NULL) < 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
