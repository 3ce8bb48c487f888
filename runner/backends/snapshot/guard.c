/* prooflock's guard for a server restored from a snapshot: no new privileges, and a seccomp
   filter that closes what the container's CRIU capabilities opened, then exec argv[1..].

   A snapshot is dumped and restored by CRIU, which needs CAP_SYS_ADMIN and CAP_SYS_PTRACE in the
   container; Docker's default seccomp profile then allows namespaces, mounts and ptrace to every
   process in it. This filter is the server's own, taken into the snapshot and restored with it,
   so everything a checked file runs is held to it whatever the container allows: no new
   namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3 says ENOSYS so that libc
   falls back to clone), no mounts, no tracing or reading other processes, no keyrings, BPF,
   perf, userfaultfd or io_uring, nothing of another ABI. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#define NAMESPACE_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
                         CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)
#define X32_SYSCALL_BIT 0x40000000
#define DENY(errno_) (SECCOMP_RET_ERRNO | ((errno_) & SECCOMP_RET_DATA))

static const int refused[] = {
    SYS_unshare, SYS_setns, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot,
    SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_move_mount, SYS_open_tree,
    SYS_mount_setattr, SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_kcmp,
    SYS_pidfd_getfd, SYS_keyctl, SYS_add_key, SYS_request_key, SYS_bpf, SYS_perf_event_open,
    SYS_userfaultfd, SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
    SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_kexec_load, SYS_kexec_file_load,
    SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_acct, SYS_swapon, SYS_swapoff,
    SYS_reboot, SYS_syslog, SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime,
    SYS_adjtimex, SYS_sethostname, SYS_setdomainname, SYS_iopl, SYS_ioperm, SYS_quotactl,
    SYS_vhangup, SYS_personality,
};
#define REFUSED (sizeof refused / sizeof refused[0])

int main(int argc, char **argv) {
  struct sock_filter filter[REFUSED * 2 + 16];
  unsigned n = 0;
#define ADD(...) (filter[n++] = (struct sock_filter)__VA_ARGS__)
  ADD(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
  ADD(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  ADD(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  ADD(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1));
  ADD(BPF_STMT(BPF_RET | BPF_K, DENY(ENOSYS)));
  ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
  ADD(BPF_STMT(BPF_RET | BPF_K, DENY(ENOSYS)));
  for (unsigned i = 0; i < REFUSED; i++) {
    ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, refused[i], 0, 1));
    ADD(BPF_STMT(BPF_RET | BPF_K, DENY(EPERM)));
  }
  /* clone: its flags are the first argument (low word on this little-endian ABI) */
  ADD(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 1, 0));
  ADD(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  ADD(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])));
  ADD(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NAMESPACE_FLAGS, 0, 1));
  ADD(BPF_STMT(BPF_RET | BPF_K, DENY(EPERM)));
  ADD(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  struct sock_fprog program = {.len = (unsigned short)n, .filter = filter};
  if (argc < 2) {
    fputs("usage: guard PROGRAM [ARG...]\n", stderr);
    return 2;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    perror("guard: cannot install its seccomp filter");
    return 126;
  }
  execvp(argv[1], argv + 1);
  perror("guard: exec");
  return 127;
}
