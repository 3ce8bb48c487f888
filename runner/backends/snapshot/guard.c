/* prooflock's guard for a server restored from a snapshot: no new privileges, and a seccomp
   allow-list (libseccomp, linked static), then exec argv[1..].

   A snapshot is dumped and restored by CRIU, which needs CAP_SYS_ADMIN and CAP_SYS_PTRACE in the
   container, and Docker's profile then opens namespaces, mounts and ptrace to every process in
   it. This filter is the server's own, taken into the snapshot and restored with it, so all a
   checked file runs is held to it whatever the container allows. It allows what Docker's
   default profile allows a container without capabilities, less tracing, io_uring, handles,
   personality changes and clock adjustment; everything else fails with EPERM. clone may not
   make namespaces; clone3 says ENOSYS, so that libc falls back to clone. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>

#define NAMESPACE_FLAGS 0x7E020000 /* CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET */
#define AF_VSOCK_DOMAIN 40

static const char *const allowed[] = {
    "accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "capget", "capset",
    "chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep", "close",
    "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create",
    "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait", "eventfd",
    "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2",
    "fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat", "fchown", "fchownat", "fcntl",
    "fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat",
    "fstatfs", "fsync", "ftruncate", "futex", "futex_waitv", "futimesat", "getcpu", "getcwd",
    "getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups", "getitimer",
    "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom",
    "getresgid", "getresuid", "getrlimit", "get_robust_list", "getrusage", "getsid",
    "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
    "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
    "ioctl", "io_destroy", "io_getevents", "io_pgetevents", "ioprio_get", "ioprio_set",
    "io_setup", "io_submit", "kill", "lchown", "lgetxattr", "link", "linkat", "listen",
    "listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise",
    "membarrier", "memfd_create", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock",
    "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv",
    "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open",
    "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv",
    "preadv2", "prlimit64", "pselect6", "pwrite64", "pwritev", "pwritev2", "read", "readahead",
    "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg", "remap_file_pages",
    "removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq",
    "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn",
    "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_getaffinity",
    "sched_getattr", "sched_getparam", "sched_get_priority_max", "sched_get_priority_min",
    "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_setattr",
    "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl",
    "semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto", "setfsgid",
    "setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority", "setregid",
    "setresgid", "setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid",
    "setsockopt", "set_thread_area", "set_tid_address", "setuid", "setxattr", "shmat", "shmctl",
    "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "socketpair",
    "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
    "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime",
    "timerfd_settime", "times", "tkill", "truncate", "umask", "uname", "unlink", "unlinkat",
    "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid", "write", "writev",
};
#define ALLOWED (sizeof allowed / sizeof allowed[0])

static scmp_filter_ctx allow_list(void) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == NULL) return NULL;
  int failed = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  for (unsigned i = 0; i < ALLOWED && !failed; i++) {
    int nr = seccomp_syscall_resolve_name(allowed[i]);
    if (nr != __NR_SCMP_ERROR) /* a name this libseccomp does not know is left refused */
      failed = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
  }
  if (!failed)
    failed = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, NAMESPACE_FLAGS, 0));
  if (!failed)
    failed = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (!failed)
    failed = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_VSOCK_DOMAIN));
  if (failed) {
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("usage: guard PROGRAM [ARG...]\n", stderr);
    return 2;
  }
  scmp_filter_ctx ctx = allow_list();
  /* no new privileges first: the filter then loads without CAP_SYS_ADMIN, and stays */
  if (ctx == NULL || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0) {
    fputs("guard: cannot install its seccomp filter\n", stderr);
    return 126;
  }
  seccomp_release(ctx);
  execvp(argv[1], argv + 1);
  perror("guard: exec");
  return 127;
}
