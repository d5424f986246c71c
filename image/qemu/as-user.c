/*
 * edgerec-as: runs a program as another user and groups, keeping only the
 * named capabilities (as ambient capabilities, bounded to them), as
 * systemd's User=, Group=, SupplementaryGroups=, AmbientCapabilities= and
 * CapabilityBoundingSet= do for edgerec.service. The QEMU test board has
 * no systemd (busybox init), and busybox's setpriv cannot switch users;
 * image/qemu/build compiles this statically for aarch64.
 *
 * usage: edgerec-as UID GID[,GID...] CAP[,CAP...]|- PROGRAM [ARG...]
 *   UID, GID  numbers; the first GID is the primary group, the rest are
 *             the supplementary groups
 *   CAP       capability numbers (linux/capability.h: CAP_IPC_LOCK 14,
 *             CAP_SYS_NICE 23), or - for none
 * PROGRAM is looked up in PATH. Any step that fails ends it with exit
 * status 127 and the step named, before the program runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_LIST 32

static void die(const char *what)
{
    fprintf(stderr, "edgerec-as: %s: %s\n", what, strerror(errno));
    exit(127);
}

static void usage(const char *why)
{
    fprintf(stderr, "edgerec-as: %s\nusage: edgerec-as UID GID[,GID...] CAP[,CAP...]|- PROGRAM [ARG...]\n", why);
    exit(2);
}

/* A comma-separated list of numbers below `max` into out[]; their count. */
static int numbers(const char *text, unsigned long max, unsigned long *out)
{
    int n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || end == p || v >= max || n == MAX_LIST || (*end != ',' && *end != '\0'))
            usage("not a list of numbers (or one too large)");
        out[n++] = v;
        if (*end == '\0')
            return n;
        p = end + 1;
    }
}

int main(int argc, char **argv)
{
    unsigned long uid[MAX_LIST], gid[MAX_LIST], cap[MAX_LIST];
    gid_t supplementary[MAX_LIST];
    int ncap = 0;

    if (argc < 5)
        usage("too few arguments");
    if (numbers(argv[1], 0xfffffffful, uid) != 1)
        usage("one UID");
    int ngid = numbers(argv[2], 0xfffffffful, gid);
    if (strcmp(argv[3], "-") != 0)
        ncap = numbers(argv[3], CAP_LAST_CAP + 1, cap);

    /* The bounding set first, while this is root: only the named. */
    for (unsigned long c = 0; c <= CAP_LAST_CAP; c++) {
        int keep = 0;
        for (int i = 0; i < ncap; i++)
            keep |= cap[i] == c;
        if (!keep && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
            die("PR_CAPBSET_DROP");
    }
    for (int i = 1; i < ngid; i++)
        supplementary[i - 1] = (gid_t)gid[i];
    if (setgroups((size_t)(ngid - 1), supplementary) != 0)
        die("setgroups");
    if (setresgid((gid_t)gid[0], (gid_t)gid[0], (gid_t)gid[0]) != 0)
        die("setresgid");
    /* Keep the permitted set across the change of user... */
    if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0)
        die("PR_SET_KEEPCAPS");
    if (setresuid((uid_t)uid[0], (uid_t)uid[0], (uid_t)uid[0]) != 0)
        die("setresuid");
    /* ...then only the named ones, inheritable too, which ambient needs. */
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    for (int i = 0; i < ncap; i++) {
        unsigned int bit = 1u << (cap[i] % 32);
        data[cap[i] / 32].permitted |= bit;
        data[cap[i] / 32].effective |= bit;
        data[cap[i] / 32].inheritable |= bit;
    }
    if (syscall(SYS_capset, &header, data) != 0)
        die("capset");
    for (int i = 0; i < ncap; i++)
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap[i], 0, 0) != 0)
            die("PR_CAP_AMBIENT_RAISE");
    /* NoNewPrivileges=yes */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die("PR_SET_NO_NEW_PRIVS");
    execvp(argv[4], argv + 4);
    die(argv[4]);
    return 127;
}
