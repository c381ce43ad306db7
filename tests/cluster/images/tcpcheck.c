/* tcpcheck HOST PORT: exits 0 if a TCP connection to HOST:PORT opens within 3 seconds, 1 if not.
 * The NetworkPolicy checks of e2e-node.sh run it in a pod (image skiff-probe). Built static. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct sockaddr_in addr = {.sin_family = AF_INET};
  if (argc != 3 || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
    fprintf(stderr, "usage: tcpcheck IPV4 PORT\n");
    return 2;
  }
  addr.sin_port = htons((unsigned short)atoi(argv[2]));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0 || (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS)) {
    printf("%s:%s refused\n", argv[1], argv[2]);
    return 1;
  }
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int err = 0;
  socklen_t len = sizeof err;
  if (poll(&p, 1, 3000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
    printf("%s:%s unreachable\n", argv[1], argv[2]);
    return 1;
  }
  printf("%s:%s open\n", argv[1], argv[2]);
  return 0;
}
