/*
 * poller: VMs polling Scheduled Events once a period, open loop, one thread, epoll.
 *
 * Each VM is one line of the targets file ("ADDRESS [BODY_LENGTH]"), polled at its own
 * address, as a VM reaches its own endpoint. VM i of --total polls at i/total of a period past
 * the start of every period, whatever the server does (open loop): a slow answer never delays
 * the next poll, and latency is measured from the poll's SCHEDULED time to the answer's last
 * byte, so the generator's own lateness is in the figure (no coordinated omission) and is also
 * reported on its own ("lag": how late the request left).
 *
 * Modes: keep-alive (one connection per VM, opened before the clock starts) and
 * new-connection (per poll: connect, send, read the answer by its Content-Length, close, as
 * the documentation's `requests.get` sample does).
 *
 * Every answer is checked: its status (--expect-status, 200 unless told), its Content-Length
 * against the VM's BODY_LENGTH when the targets file gives one, and that exactly that many
 * body bytes arrive. A poll still unanswered when its VM's next poll is due (or one period
 * after the last poll) is a timeout. Errors are counted by kind; any error makes the exit
 * status 1 (usage errors: 2).
 *
 * Output: one JSON line with the counts, latency and lag percentiles from log-linear
 * histograms (exact below 1,024 us, within 0.2% above; each value is its bucket's upper bound),
 * the histograms themselves (so several processes' runs can be merged), and the CPU seconds
 * this process spent while measuring (getrusage).
 *
 * Build: gcc -O2 -o poller poller.c -lm (Linux 5.11 or later for epoll_pwait2, else a timerfd;
 * no other dependencies).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define PATH "/metadata/scheduledevents?api-version=2020-07-01"
#define MAX_HEAD 8192
#define CONNECT_WINDOW 256       /* connections being opened at once before the clock starts */
#define SETUP_SECONDS 60         /* opening every kept connection may take this long at most */
#define SPARE_FDS 16             /* stdio, epoll, timer */
#define SUB_BITS 9               /* histogram: 512 buckets per power of two */
#define SUB_COUNT (1u << SUB_BITS)
#define EXACT_LIMIT (2u * SUB_COUNT)
#define MAX_SHIFT 40
#define BUCKETS (EXACT_LIMIT + MAX_SHIFT * SUB_COUNT)
#define TIMER_TAG UINT32_MAX

enum mode { KEEP_ALIVE, NEW_CONNECTION };
enum phase { IDLE, CONNECTING, HEAD, BODY };
enum outcome {
    OK = -1,
    E_CONNECT = 0, /* connect() failed or was refused */
    E_CLOSED,      /* the server closed or reset the connection before the whole answer */
    E_TIMEOUT,     /* no whole answer by the VM's next poll (or one period after the last) */
    E_STATUS,      /* a status other than --expect-status */
    E_LENGTH,      /* a Content-Length other than the VM's expected body length */
    E_MALFORMED,   /* no parsable status line or Content-Length, or bytes past the answer */
    E_DESCRIPTORS, /* no socket could be made (out of file descriptors) */
    E_IDLE_CLOSED, /* not a poll: the server closed a kept connection between polls */
    E_UNSOLICITED, /* not a poll: bytes arrived while no poll was waiting */
    ERROR_KINDS
};
static const char *const ERROR_NAMES[ERROR_KINDS] = {
    "connect", "closed", "timeout", "status", "length",
    "malformed", "descriptors", "idle_closed", "unsolicited",
};

struct vm {
    int fd;
    uint8_t phase;
    uint16_t partial_len;
    int32_t expected_length; /* -1: any */
    uint32_t body_left;
    char *partial;           /* head bytes split across reads */
    int64_t due_ns;          /* the scheduled time of the poll in flight */
    int64_t offset_ns;       /* i/total of a period */
    struct sockaddr_in addr;
    char *request;
    uint16_t request_len;
};

struct histogram {
    uint64_t counts[BUCKETS];
    uint64_t total;
    uint64_t max_us;
};

struct options {
    const char *targets;
    long first, count, total, port;
    double period, duration;
    enum mode mode;
    long expect_status;
    const char *if_none_match;
    int wait_start;
};

static struct vm *vms;
static long vm_count;
static struct options opt;
static int epfd, timerfd;
static int64_t armed_ns = -1;
static long in_flight;
static uint64_t ok_polls, issued_polls, errors[ERROR_KINDS];
static struct histogram latency, lag;
static int64_t last_answer_ns;
static char scratch[65536];

_Noreturn static void die(int status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("poller: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(status);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

/* -- histograms ------------------------------------------------------------------------- */

static uint32_t bucket_of(uint64_t us) {
    if (us < EXACT_LIMIT) return (uint32_t)us;
    unsigned shift = (unsigned)(63 - __builtin_clzll(us)) - SUB_BITS;
    if (shift > MAX_SHIFT) return BUCKETS - 1;
    return EXACT_LIMIT + (shift - 1) * SUB_COUNT + (uint32_t)((us >> shift) - SUB_COUNT);
}

/* The largest value that falls in ``bucket``: what a percentile reports, never too low. */
static uint64_t bucket_value(uint32_t bucket) {
    if (bucket < EXACT_LIMIT) return bucket;
    uint32_t shift = (bucket - EXACT_LIMIT) / SUB_COUNT + 1;
    uint64_t lowest = ((uint64_t)((bucket - EXACT_LIMIT) % SUB_COUNT) + SUB_COUNT) << shift;
    return lowest + (1ull << shift) - 1;
}

static void record(struct histogram *h, int64_t ns) {
    uint64_t us = ns > 0 ? (uint64_t)(ns / 1000) : 0;
    h->counts[bucket_of(us)]++;
    h->total++;
    if (us > h->max_us) h->max_us = us;
}

/* Nearest rank: the smallest value with at least ``fraction`` of the values at or below it. */
static double percentile_ms(const struct histogram *h, double fraction) {
    if (h->total == 0) return 0.0;
    uint64_t rank = (uint64_t)ceil(fraction * (double)h->total);
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (uint32_t b = 0; b < BUCKETS; b++) {
        seen += h->counts[b];
        if (seen >= rank) {
            uint64_t value = bucket_value(b);
            return (value > h->max_us ? h->max_us : value) / 1000.0;
        }
    }
    return h->max_us / 1000.0;
}

static void print_histogram(const char *name, const struct histogram *h) {
    printf("\"%s\":[", name);
    int first = 1;
    for (uint32_t b = 0; b < BUCKETS; b++) {
        if (!h->counts[b]) continue;
        printf("%s[%llu,%llu]", first ? "" : ",", (unsigned long long)bucket_value(b),
               (unsigned long long)h->counts[b]);
        first = 0;
    }
    printf("]");
}

/* -- arguments -------------------------------------------------------------------------- */

_Noreturn static void usage(const char *problem) {
    fprintf(stderr,
            "poller: %s\n"
            "usage: poller --targets FILE --port PORT [--first I] [--count N] [--total N]\n"
            "              [--period SECONDS] [--duration SECONDS]\n"
            "              [--mode keep-alive|new-connection] [--expect-status CODE]\n"
            "              [--if-none-match TAG] [--wait-start]\n"
            "FILE: one VM per line, \"ADDRESS [BODY_LENGTH]\". --wait-start prints \"ready\"\n"
            "once set up, then reads the start time (CLOCK_MONOTONIC seconds) from stdin.\n",
            problem);
    exit(2);
}

static long parse_long(const char *name, const char *text, long lowest, long highest) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < lowest || value > highest) {
        char message[160];
        snprintf(message, sizeof message, "%s must be a whole number from %ld to %ld, not '%s'",
                 name, lowest, highest, text);
        usage(message);
    }
    return value;
}

static double parse_seconds(const char *name, const char *text) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !(value > 0) || value > 86400) {
        char message[160];
        snprintf(message, sizeof message, "%s must be a number of seconds above 0, not '%s'",
                 name, text);
        usage(message);
    }
    return value;
}

static void parse_options(int argc, char **argv) {
    static const struct option long_options[] = {
        {"targets", required_argument, 0, 't'},  {"first", required_argument, 0, 'f'},
        {"count", required_argument, 0, 'c'},    {"total", required_argument, 0, 'n'},
        {"port", required_argument, 0, 'p'},     {"period", required_argument, 0, 'P'},
        {"duration", required_argument, 0, 'd'}, {"mode", required_argument, 0, 'm'},
        {"expect-status", required_argument, 0, 's'},
        {"if-none-match", required_argument, 0, 'i'},
        {"wait-start", no_argument, 0, 'w'},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    opt = (struct options){.first = 0, .count = -1, .total = -1, .port = -1, .period = 1.0,
                           .duration = 10.0, .mode = KEEP_ALIVE, .expect_status = 200};
    opterr = 0;
    int code;
    while ((code = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        switch (code) {
        case 't': opt.targets = optarg; break;
        case 'f': opt.first = parse_long("--first", optarg, 0, 100000000); break;
        case 'c': opt.count = parse_long("--count", optarg, 1, 100000000); break;
        case 'n': opt.total = parse_long("--total", optarg, 1, 100000000); break;
        case 'p': opt.port = parse_long("--port", optarg, 1, 65535); break;
        case 'P': opt.period = parse_seconds("--period", optarg); break;
        case 'd': opt.duration = parse_seconds("--duration", optarg); break;
        case 's': opt.expect_status = parse_long("--expect-status", optarg, 100, 599); break;
        case 'i': opt.if_none_match = optarg; break;
        case 'w': opt.wait_start = 1; break;
        case 'm':
            if (!strcmp(optarg, "keep-alive")) opt.mode = KEEP_ALIVE;
            else if (!strcmp(optarg, "new-connection")) opt.mode = NEW_CONNECTION;
            else usage("--mode must be keep-alive or new-connection");
            break;
        case 'h': usage("polls Scheduled Events once a period from many VMs");
        default: {
            char message[160];
            snprintf(message, sizeof message, "unknown or incomplete option '%s'",
                     argv[optind - 1]);
            usage(message);
        }
        }
    }
    if (optind < argc) usage("unexpected arguments after the options");
    if (!opt.targets) usage("--targets FILE is required");
    if (opt.port < 0) usage("--port is required");
    if (opt.expect_status == 304 && !opt.if_none_match)
        usage("--expect-status 304 needs --if-none-match TAG");
    if (opt.if_none_match && strpbrk(opt.if_none_match, "\r\n"))
        usage("--if-none-match must be one line");
}

/* -- targets ---------------------------------------------------------------------------- */

static char *build_request(const char *address, uint16_t *length) {
    char text[512];
    int n = snprintf(text, sizeof text,
                     "GET " PATH " HTTP/1.1\r\nHost: %s:%ld\r\n"
                     "User-Agent: forewarn-bench-poller\r\nAccept-Encoding: gzip, deflate\r\n"
                     "Accept: */*\r\nConnection: keep-alive\r\nMetadata: true\r\n%s%s%s\r\n",
                     address, opt.port, opt.if_none_match ? "If-None-Match: " : "",
                     opt.if_none_match ? opt.if_none_match : "", opt.if_none_match ? "\r\n" : "");
    if (n < 0 || n >= (int)sizeof text) die(2, "--if-none-match is too long");
    *length = (uint16_t)n;
    return strndup(text, (size_t)n);
}

static void load_targets(void) {
    FILE *file = fopen(opt.targets, "r");
    if (!file) die(2, "cannot read %s: %s", opt.targets, strerror(errno));
    char line[256];
    long lines = 0, capacity = 0;
    vms = NULL;
    while (fgets(line, sizeof line, file)) {
        char address[64];
        long length = -1;
        int fields = sscanf(line, "%63s %ld", address, &length);
        if (fields < 1) continue; /* blank line */
        long index = lines++;
        if (index < opt.first || (opt.count > 0 && index >= opt.first + opt.count)) continue;
        if (vm_count == capacity) {
            capacity = capacity ? capacity * 2 : 1024;
            vms = realloc(vms, (size_t)capacity * sizeof *vms);
            if (!vms) die(1, "out of memory");
        }
        struct vm *vm = &vms[vm_count++];
        memset(vm, 0, sizeof *vm);
        vm->fd = -1;
        vm->expected_length = fields == 2 ? (int32_t)length : -1;
        vm->addr.sin_family = AF_INET;
        vm->addr.sin_port = htons((uint16_t)opt.port);
        if (inet_pton(AF_INET, address, &vm->addr.sin_addr) != 1)
            die(2, "%s line %ld: '%s' is not an IPv4 address", opt.targets, index + 1, address);
        vm->request = build_request(address, &vm->request_len);
    }
    fclose(file);
    if (opt.total < 0) opt.total = lines;
    if (opt.first >= lines) die(2, "--first %ld: %s has %ld VMs", opt.first, opt.targets, lines);
    if (opt.count > 0 && vm_count < opt.count)
        die(2, "--first %ld --count %ld: %s has only %ld VMs", opt.first, opt.count,
            opt.targets, lines);
    if (opt.first + vm_count > opt.total)
        die(2, "--total %ld is fewer than VM %ld of this slice", opt.total,
            opt.first + vm_count);
    int64_t period_ns = (int64_t)(opt.period * 1e9);
    for (long j = 0; j < vm_count; j++)
        vms[j].offset_ns = (int64_t)((__int128)(opt.first + j) * period_ns / opt.total);
}

static void raise_open_files(void) {
    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
    if (opt.mode == KEEP_ALIVE && (rlim_t)(vm_count + SPARE_FDS) > limit.rlim_cur)
        die(2, "%ld kept connections need %ld file descriptors; this process may open %llu: "
            "give each process a smaller --count",
            vm_count, vm_count + SPARE_FDS, (unsigned long long)limit.rlim_cur);
}

/* -- one poll --------------------------------------------------------------------------- */

static void watch(struct vm *vm, int op, uint32_t events) {
    struct epoll_event event = {.events = events, .data.u32 = (uint32_t)(vm - vms)};
    if (epoll_ctl(epfd, op, vm->fd, &event) < 0) die(1, "epoll_ctl: %s", strerror(errno));
}

static void hang_up(struct vm *vm) {
    if (vm->fd >= 0) close(vm->fd); /* closing also drops it from the epoll set */
    vm->fd = -1;
    free(vm->partial);
    vm->partial = NULL;
    vm->partial_len = 0;
}

static void finish(struct vm *vm, int outcome, int64_t now) {
    if (vm->phase == IDLE) return;
    vm->phase = IDLE;
    in_flight--;
    if (outcome == OK) {
        ok_polls++;
        record(&latency, now - vm->due_ns);
        last_answer_ns = now;
    } else {
        errors[outcome]++;
    }
    free(vm->partial);
    vm->partial = NULL;
    vm->partial_len = 0;
    if (outcome != OK || opt.mode == NEW_CONNECTION) hang_up(vm);
}

static int send_request(struct vm *vm) {
    ssize_t sent = send(vm->fd, vm->request, vm->request_len, MSG_NOSIGNAL);
    return sent == vm->request_len; /* ~250 bytes: always fits an idle socket's buffer */
}

/* Start a connection; 1 when it is open already, 0 when in progress, -1 on failure. */
static int open_connection(struct vm *vm, int *failure) {
    vm->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (vm->fd < 0) {
        *failure = E_DESCRIPTORS;
        return -1;
    }
    /* No TCP_NODELAY: a request is one write, which Nagle never holds back. */
    if (connect(vm->fd, (struct sockaddr *)&vm->addr, sizeof vm->addr) == 0) return 1;
    if (errno == EINPROGRESS) return 0;
    *failure = E_CONNECT;
    return -1;
}

static void poll_vm(struct vm *vm, int64_t due, int64_t now) {
    issued_polls++;
    record(&lag, now - due);
    if (vm->phase != IDLE) finish(vm, E_TIMEOUT, now); /* a whole period without an answer */
    vm->due_ns = due;
    in_flight++;
    if (vm->fd < 0) {
        int failure = E_CONNECT;
        int opened = open_connection(vm, &failure);
        if (opened < 0) {
            vm->phase = CONNECTING;
            finish(vm, failure, now);
            return;
        }
        if (opened == 0) {
            /* On loopback the handshake has usually completed inside connect() already:
             * send at once, and wait for the connection only when it has not. */
            ssize_t sent = send(vm->fd, vm->request, vm->request_len, MSG_NOSIGNAL);
            if (sent < 0 && (errno == EAGAIN || errno == ENOTCONN)) {
                vm->phase = CONNECTING;
                watch(vm, EPOLL_CTL_ADD, EPOLLOUT);
                return;
            }
            watch(vm, EPOLL_CTL_ADD, EPOLLIN | EPOLLRDHUP);
            vm->phase = HEAD;
            if (sent != vm->request_len) finish(vm, sent < 0 ? E_CONNECT : E_CLOSED, now);
            return;
        }
        watch(vm, EPOLL_CTL_ADD, EPOLLIN | EPOLLRDHUP);
    }
    vm->phase = HEAD;
    if (!send_request(vm)) finish(vm, E_CLOSED, now);
}

/* -- answers ---------------------------------------------------------------------------- */

/* Status and Content-Length of a head; E_MALFORMED when either is missing or unreadable. */
static int parse_head(const char *head, size_t length, long *status, long *content_length) {
    if (length < 12 || memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ') return E_MALFORMED;
    char code[4] = {head[9], head[10], head[11], 0};
    char *end;
    *status = strtol(code, &end, 10);
    if (*end) return E_MALFORMED;
    *content_length = -1;
    const char *line = memchr(head, '\n', length);
    while (line && (size_t)(line + 1 - head) < length) {
        line++;
        size_t left = length - (size_t)(line - head);
        if (left > 15 && strncasecmp(line, "content-length:", 15) == 0) {
            if (*content_length >= 0) return E_MALFORMED; /* two of them */
            const char *digits = line + 15;
            while (*digits == ' ' || *digits == '\t') digits++;
            errno = 0;
            long value = strtol(digits, &end, 10);
            if (errno || end == digits || value < 0 || value > 100000000) return E_MALFORMED;
            *content_length = value;
        } else if (left > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0) {
            return E_MALFORMED; /* the endpoint's answers always carry a Content-Length */
        }
        line = memchr(line, '\n', left);
    }
    if (*content_length < 0) {
        if (*status != 304 && *status != 204) return E_MALFORMED;
        *content_length = 0;
    }
    return OK;
}

/* The head is complete: judge it and get ready for the body. Returns OK to go on. */
static int accept_head(struct vm *vm, const char *head, size_t length) {
    long status, content_length;
    int outcome = parse_head(head, length, &status, &content_length);
    if (outcome != OK) return outcome;
    if (status != opt.expect_status) return E_STATUS;
    if (status == 200 && vm->expected_length >= 0 && content_length != vm->expected_length)
        return E_LENGTH;
    vm->body_left = (uint32_t)content_length;
    vm->phase = BODY;
    return OK;
}

static const char *find_end_of_head(const char *data, size_t length) {
    const char *end = memmem(data, length, "\r\n\r\n", 4);
    return end ? end + 4 : NULL;
}

/* Bytes of the answer to ``vm``'s poll. */
static void feed(struct vm *vm, const char *data, size_t length, int64_t now) {
    if (vm->phase == HEAD) {
        if (!vm->partial) {
            const char *end = find_end_of_head(data, length);
            if (!end) {
                if (length > MAX_HEAD) { finish(vm, E_MALFORMED, now); return; }
                vm->partial = malloc(MAX_HEAD);
                if (!vm->partial) die(1, "out of memory");
                memcpy(vm->partial, data, length);
                vm->partial_len = (uint16_t)length;
                return;
            }
            int outcome = accept_head(vm, data, (size_t)(end - data));
            if (outcome != OK) {
                finish(vm, outcome, now);
                return;
            }
            length -= (size_t)(end - data);
            data = end;
        } else {
            size_t old = vm->partial_len;
            size_t take = length < MAX_HEAD - old ? length : MAX_HEAD - old;
            memcpy(vm->partial + old, data, take);
            vm->partial_len = (uint16_t)(old + take);
            size_t from = old > 3 ? old - 3 : 0;
            const char *end = find_end_of_head(vm->partial + from, vm->partial_len - from);
            if (!end) {
                if (vm->partial_len >= MAX_HEAD) { finish(vm, E_MALFORMED, now); return; }
                return;
            }
            size_t head_length = (size_t)(end - vm->partial);
            int outcome = accept_head(vm, vm->partial, head_length);
            if (outcome != OK) {
                finish(vm, outcome, now);
                return;
            }
            size_t used = head_length - old; /* bytes of ``data`` that ended the head */
            data += used;
            length -= used;
            free(vm->partial);
            vm->partial = NULL;
            vm->partial_len = 0;
        }
    }
    if (length > vm->body_left) { finish(vm, E_MALFORMED, now); return; } /* more than announced */
    vm->body_left -= (uint32_t)length;
    if (vm->body_left == 0) finish(vm, OK, now);
}

static void readable(struct vm *vm) {
    for (;;) {
        ssize_t got = read(vm->fd, scratch, sizeof scratch);
        int64_t now = now_ns();
        if (got > 0) {
            if (vm->phase == IDLE) {
                errors[E_UNSOLICITED]++;
                hang_up(vm);
                return;
            }
            feed(vm, scratch, (size_t)got, now);
            if (vm->fd < 0 || vm->phase == IDLE) return; /* answered: nothing more is due */
            continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (vm->phase == IDLE) {
            errors[E_IDLE_CLOSED]++;
            hang_up(vm);
        } else {
            finish(vm, E_CLOSED, now);
        }
        return;
    }
}

static void connected(struct vm *vm) {
    int error = 0;
    socklen_t size = sizeof error;
    getsockopt(vm->fd, SOL_SOCKET, SO_ERROR, &error, &size);
    int64_t now = now_ns();
    if (error) { finish(vm, E_CONNECT, now); return; }
    watch(vm, EPOLL_CTL_MOD, EPOLLIN | EPOLLRDHUP);
    vm->phase = HEAD;
    if (!send_request(vm)) finish(vm, E_CLOSED, now);
}

static void handle(struct epoll_event *event) {
    struct vm *vm = &vms[event->data.u32];
    if (vm->fd < 0) return;
    if (vm->phase == CONNECTING) connected(vm);
    else readable(vm);
}

/* -- the clock -------------------------------------------------------------------------- */

static void arm(int64_t at_ns) {
    if (at_ns == armed_ns) return;
    armed_ns = at_ns;
    struct itimerspec when = {.it_value = {.tv_sec = at_ns / 1000000000,
                                           .tv_nsec = at_ns % 1000000000}};
    if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) when.it_value.tv_nsec = 1;
    if (timerfd_settime(timerfd, TFD_TIMER_ABSTIME, &when, NULL) < 0)
        die(1, "timerfd_settime: %s", strerror(errno));
}

/* Until ``wake_ns`` or an event, whichever comes first. epoll_pwait2 (Linux 5.11) takes a
 * timeout in nanoseconds, which saves arming and reading a timerfd for every poll; older
 * kernels get the timerfd. */
static void wait_until(int64_t wake_ns) {
    static int use_timerfd = 0;
    struct epoll_event events[512];
    int ready = -1;
    if (!use_timerfd) {
        int64_t left = wake_ns - now_ns();
        if (left < 0) left = 0;
        struct timespec timeout = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
        ready = epoll_pwait2(epfd, events, 512, &timeout, NULL);
        if (ready < 0 && errno == ENOSYS) use_timerfd = 1;
    }
    if (use_timerfd) {
        arm(wake_ns);
        ready = epoll_wait(epfd, events, 512, -1);
    }
    if (ready < 0 && errno != EINTR) die(1, "epoll_wait: %s", strerror(errno));
    for (int k = 0; k < ready; k++) {
        if (events[k].data.u32 == TIMER_TAG) {
            uint64_t expirations;
            if (read(timerfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
                die(1, "timerfd read: %s", strerror(errno));
            armed_ns = -1;
        } else {
            handle(&events[k]);
        }
    }
}

/* Keep-alive: every VM's connection, open before the clock starts. */
static void open_all(void) {
    int64_t deadline = now_ns() + (int64_t)SETUP_SECONDS * 1000000000;
    long next = 0, opening = 0, opened = 0;
    while (opened < vm_count) {
        while (next < vm_count && opening < CONNECT_WINDOW) {
            struct vm *vm = &vms[next++];
            int failure = E_CONNECT;
            int state = open_connection(vm, &failure);
            if (state < 0)
                die(1, "could not open VM %ld's connection (%s): %s", opt.first + (vm - vms),
                    ERROR_NAMES[failure], strerror(errno));
            if (state == 1) {
                watch(vm, EPOLL_CTL_ADD, EPOLLIN | EPOLLRDHUP);
                opened++;
            } else {
                vm->phase = CONNECTING;
                watch(vm, EPOLL_CTL_ADD, EPOLLOUT);
                opening++;
            }
        }
        if (opening == 0) continue;
        struct epoll_event events[512];
        int left_ms = (int)((deadline - now_ns()) / 1000000);
        if (left_ms <= 0)
            die(1, "%ld of %ld connections were still opening after %d s", opening, vm_count,
                SETUP_SECONDS);
        int ready = epoll_wait(epfd, events, 512, left_ms);
        for (int k = 0; k < ready; k++) {
            struct vm *vm = &vms[events[k].data.u32];
            if (vm->phase != CONNECTING) continue; /* an open one: nothing is expected yet */
            int error = 0;
            socklen_t size = sizeof error;
            getsockopt(vm->fd, SOL_SOCKET, SO_ERROR, &error, &size);
            if (error)
                die(1, "could not open VM %ld's connection: %s", opt.first + (vm - vms),
                    strerror(error));
            vm->phase = IDLE;
            watch(vm, EPOLL_CTL_MOD, EPOLLIN | EPOLLRDHUP);
            opening--;
            opened++;
        }
    }
}

static int64_t start_time(void) {
    if (!opt.wait_start) return now_ns();
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) die(1, "--wait-start: stdin closed before the start");
    char *end;
    double seconds = strtod(line, &end);
    if (end == line || seconds <= 0) die(1, "--wait-start: '%s' is not a start time", line);
    return (int64_t)(seconds * 1e9);
}

/* -- the run ---------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    parse_options(argc, argv);
    load_targets();
    raise_open_files();
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake when a poll is due, not up to 50 us after */
    epfd = epoll_create1(EPOLL_CLOEXEC);
    timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epfd < 0 || timerfd < 0) die(1, "epoll or timerfd: %s", strerror(errno));
    struct epoll_event timer_event = {.events = EPOLLIN, .data.u32 = TIMER_TAG};
    epoll_ctl(epfd, EPOLL_CTL_ADD, timerfd, &timer_event);
    if (opt.mode == KEEP_ALIVE) open_all();

    int64_t origin = start_time();
    double cpu_before = cpu_seconds();
    int64_t period_ns = (int64_t)(opt.period * 1e9);
    long periods = (long)ceil(opt.duration / opt.period - 1e-9);
    long cursor_period = 0, cursor_vm = 0;
    int64_t last_due = origin + (periods - 1) * period_ns + vms[vm_count - 1].offset_ns;
    int64_t drain_deadline = last_due + period_ns;
    for (;;) {
        int64_t now = now_ns();
        while (cursor_period < periods) {
            struct vm *vm = &vms[cursor_vm];
            int64_t due = origin + cursor_period * period_ns + vm->offset_ns;
            if (due > now) break;
            poll_vm(vm, due, now);
            if (++cursor_vm == vm_count) {
                cursor_vm = 0;
                cursor_period++;
            }
        }
        if (cursor_period == periods) {
            if (in_flight == 0) break;
            if (now >= drain_deadline) {
                for (long j = 0; j < vm_count; j++) finish(&vms[j], E_TIMEOUT, now);
                break;
            }
            wait_until(drain_deadline);
        } else {
            wait_until(origin + cursor_period * period_ns + vms[cursor_vm].offset_ns);
        }
    }
    double cpu = cpu_seconds() - cpu_before;
    int64_t finished = now_ns();

    uint64_t failed = 0, total_errors = 0;
    for (int k = 0; k < ERROR_KINDS; k++) {
        total_errors += errors[k];
        if (k != E_IDLE_CLOSED && k != E_UNSOLICITED) failed += errors[k];
    }
    printf("{\"mode\":\"%s\",\"vms\":%ld,\"first\":%ld,\"total\":%ld,\"period_s\":%g,"
           "\"periods\":%ld,\"polls\":%llu,\"ok\":%llu,\"failed\":%llu,\"errors\":%llu,"
           "\"error_kinds\":{",
           opt.mode == KEEP_ALIVE ? "keep-alive" : "new-connection", vm_count, opt.first,
           opt.total, opt.period, periods, (unsigned long long)issued_polls,
           (unsigned long long)ok_polls, (unsigned long long)failed,
           (unsigned long long)total_errors);
    for (int k = 0; k < ERROR_KINDS; k++)
        printf("%s\"%s\":%llu", k ? "," : "", ERROR_NAMES[k], (unsigned long long)errors[k]);
    printf("},\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,"
           "\"lag_p99_ms\":%.3f,\"max_lag_ms\":%.3f,\"cpu_s\":%.6f,\"span_s\":%.6f,"
           "\"wall_s\":%.6f,",
           percentile_ms(&latency, 0.50), percentile_ms(&latency, 0.90),
           percentile_ms(&latency, 0.99), percentile_ms(&latency, 0.999),
           latency.max_us / 1000.0, percentile_ms(&lag, 0.99), lag.max_us / 1000.0, cpu,
           ((last_answer_ns > origin ? last_answer_ns : origin) - origin) / 1e9,
           (finished - origin) / 1e9);
    print_histogram("latency_us", &latency);
    putchar(',');
    print_histogram("lag_us", &lag);
    printf("}\n");
    fflush(stdout);
    if (total_errors) {
        fprintf(stderr, "poller: %llu error(s) in %llu polls:", (unsigned long long)total_errors,
                (unsigned long long)issued_polls);
        for (int k = 0; k < ERROR_KINDS; k++)
            if (errors[k]) fprintf(stderr, " %s %llu", ERROR_NAMES[k],
                                   (unsigned long long)errors[k]);
        fputc('\n', stderr);
        return 1;
    }
    return 0;
}
