/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A single-member etcd of the test's own, on loopback ports nobody else
 * holds, with its data in a temporary folder: started once, killed and
 * its folder removed at exit, on FAIL too (the caller sets its
 * test_server_pid, which FAIL kills; the exit handler here reaps it and
 * removes the folder). The member dies with
 * the test even when the test is killed (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_NAME "meta"
#include "meta_etcd.h"

static char etcd_dir[64];

int free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
    FAIL("a free port: %s", strerror(errno));
  close(fd); /* nobody listens there now */
  return ntohs(sa.sin_port);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void etcd_cleanup(void)
{
  if (test_server_pid > 0) {
    kill(test_server_pid, SIGKILL);
    waitpid(test_server_pid, NULL, 0);
    test_server_pid = 0;
  }
  if (etcd_dir[0]) {
    nftw(etcd_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    etcd_dir[0] = '\0';
  }
}

static void on_signal(int sig)
{
  etcd_cleanup();
  signal(sig, SIG_DFL);
  raise(sig);
}

pid_t etcd_start(char *endpoint, size_t len)
{
  char data[96], log[96], client[64], peer[64], cluster[80];
  strcpy(etcd_dir, "/tmp/rmx-meta-XXXXXX");
  if (!mkdtemp(etcd_dir))
    FAIL("mkdtemp: %s", strerror(errno));
  atexit(etcd_cleanup);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  int cport = free_port(), pport = free_port();
  snprintf(data, sizeof(data), "%s/data", etcd_dir);
  snprintf(log, sizeof(log), "%s/etcd.log", etcd_dir);
  snprintf(client, sizeof(client), "http://127.0.0.1:%d", cport);
  snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", pport);
  snprintf(cluster, sizeof(cluster), "t=%s", peer);
  snprintf(endpoint, len, "%s", client);
  const char *bin = getenv("RMX_TEST_ETCD");
  if (!bin || !*bin)
    bin = "etcd";
  pid_t pid = fork();
  if (pid < 0)
    FAIL("fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execlp(bin, bin, "--name", "t", "--data-dir", data, "--listen-client-urls", client,
           "--advertise-client-urls", client, "--listen-peer-urls", peer,
           "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
    _exit(127);
  }
  test_server_pid = pid;
  return pid;
}

/* The member's log, when the test fails with etcd in the picture. */
void etcd_log_tail(void)
{
  char cmd[128];
  if (!etcd_dir[0])
    return;
  snprintf(cmd, sizeof(cmd), "tail -n 20 %s/etcd.log >&2", etcd_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "meta: no etcd log\n");
}

int etcd_alive(void)
{
  return test_server_pid > 0 && waitpid(test_server_pid, NULL, WNOHANG) == 0;
}
