/*
 * carve_run.c — carve-run: run an unmodified program with its GPU memory
 * served by carve.
 *
 * A thin front end: it turns its options into the environment of
 * libcarve_preload.so (CARVE_CONF for the arenas, CARVE_RUN_* for the
 * trace, report and picture), checks them with the library's own parser so
 * that a mistake is reported here and not inside the program, puts the
 * interposer first in LD_PRELOAD and executes the program in its place. Its
 * exit status is the program's. Everything it sets can be set by hand:
 * `carve-run --print-env ...` shows it.
 *
 * Nothing it is given may leave the program running without carve or
 * without what was asked for: a configuration whose arena would hold
 * nothing (carve_config_check), an interposer that is no shared library
 * defining cuMemAlloc_v2, an output file that could not be written, an
 * option given twice, a program name that was meant as --report's file are
 * refused before the program starts, with exit status 2.
 */
#include <elf.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "carve.h"
#include "cli.h"

#define EXIT_USAGE 2

static void usage(FILE *out) {
    fputs(
        "usage: carve-run [options] [--] PROGRAM [ARGS...]\n"
        "\n"
        "Run PROGRAM with every device allocation it makes through the CUDA runtime or\n"
        "driver (cudaMalloc, cudaMallocAsync, cuMemAlloc, ... from C/C++, PyTorch, CuPy,\n"
        "JAX) served by carve: one arena per device, cached memory reused in nanoseconds,\n"
        "an optional hard cap per device. The program needs no change.\n"
        "\n"
        "Memory:\n"
        "      --limit SIZE|FRACTION   cap on each device's memory, e.g. --limit 8GiB or\n"
        "                              --limit 0.5 (half the device); past it the program\n"
        "                              gets cudaErrorMemoryAllocation, and cudaMemGetInfo\n"
        "                              reports the cap as total memory\n"
        "      --device-limit N=SIZE   cap for device N only (repeatable), e.g.\n"
        "                              --device-limit 1=2GiB\n"
        "      --initial SIZE          reserve this much at the first allocation\n"
        "      --growth / --no-growth  reserve more on demand (default), or hold exactly\n"
        "                              --initial bytes\n"
        "      --mode default|vmm|segments\n"
        "                              default: virtual-memory mode where the GPU\n"
        "                              supports it (2 MiB granules mapped as buffers\n"
        "                              need them, unmapped when unused: the footprint\n"
        "                              follows the live data), else segments; vmm: that\n"
        "                              mode or nothing; segments: cuMemAlloc segments,\n"
        "                              cached whole (also with --initial)\n"
        "      --conf TEXT             further arena keys, as in CARVE_CONF, e.g.\n"
        "                              --conf fail_backend_every=100\n"
        "  SIZE: a number with B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB), e.g. 1.5GiB.\n"
        "\n"
        "Measurement:\n"
        "      --trace FILE[.gz]       record every allocation and free (size, stream,\n"
        "                              time, pointer) for carve-replay\n"
        "      --report[=FILE.json]    at exit, print peaks, footprint, out-of-memory\n"
        "                              count, call counts and time spent in carve on\n"
        "                              stderr (and as JSON into FILE.json)\n"
        "      --svg FILE              at exit, draw the run's memory over time\n"
        "\n"
        "Faults (what the program does when memory runs out):\n"
        "      --fail-every N          every Nth allocation call of the program fails\n"
        "                              (cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY)\n"
        "      --fail-at N             the Nth allocation call fails; calls are numbered\n"
        "                              from 1 over every entry point (cudaMalloc,\n"
        "                              cudaMallocAsync, cuMemAlloc, cuMemCreate, ...)\n"
        "\n"
        "Other:\n"
        "      --no-ordered-reuse      memory freed with cudaFree waits for the device even\n"
        "                              where all streams are blocking (docs/dropin.md,\n"
        "                              \"Ordered reuse\")\n"
        "      --preload PATH          the interposer to use (default: the one installed\n"
        "                              beside carve-run)\n"
        "      --print-env             print the environment carve-run would set, and exit\n"
        "  -q, --quiet                 no carve-run messages on stderr\n"
        "  -h, --help                  this help\n"
        "  -V, --version               the carve version\n"
        "\n"
        "Examples:\n"
        "  carve-run --limit 8GiB -- python train.py\n"
        "  carve-run --trace run.csv.gz --report -- ./my_cuda_app --size 4096\n"
        "  carve-replay run.csv.gz                 # then replay what was recorded\n"
        "\n"
        "Every option has an environment form, so LD_PRELOAD=.../libcarve_preload.so with\n"
        "CARVE_CONF=\"limit=8GiB\" CARVE_RUN_TRACE=run.csv.gz CARVE_RUN_FAIL_EVERY=100 works as\n"
        "well (docs/dropin.md).\n"
        "Exit status: the program's; 2 for bad options; 127 if the program cannot be run.\n",
        out);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("carve-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'carve-run --help' for more information.\n", stderr);
    exit(EXIT_USAGE);
}

/* A growing CARVE_CONF text: "key=value" pairs, ';' before device sections. */
typedef struct conf {
    char text[4096];
    size_t len;
} conf;

static void conf_add(conf *c, const char *sep, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void conf_add(conf *c, const char *sep, const char *fmt, ...) {
    char item[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(item, sizeof(item), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(item) || c->len + strlen(sep) + (size_t)n + 1 > sizeof(c->text))
        usage_error("the options make too long a configuration");
    c->len += (size_t)snprintf(c->text + c->len, sizeof(c->text) - c->len, "%s%s", c->len ? sep : "", item);
}

/* A value for key must be one token: no separators of the configuration. */
static const char *token(const char *v, const char *opt) {
    if (!*v || strpbrk(v, ",;="))
        usage_error("bad value '%s' for %s", v, opt);
    return v;
}

/* A count of calls for opt (from the command line, or the environment
 * variable opt names): a whole number from 1. */
static const char *call_count(const char *v, const char *opt) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno || n == 0)
        usage_error("bad value '%s' for %s: a whole number of calls from 1, e.g. 100", v, opt);
    return v;
}

/* Where meson installs the interposer, from the directory carve-run is
 * installed in (or an absolute path, when libdir was given as one). */
#ifndef CARVE_RUN_PRELOAD_RELATIVE
#define CARVE_RUN_PRELOAD_RELATIVE "../lib/libcarve_preload.so"
#endif

/* The interposer beside this program: where this build installs it, the
 * usual installed layouts, and the build tree. */
static int find_preload(char *out, size_t len) {
    const char *env = getenv("CARVE_PRELOAD");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    static const char *const rel[] = {CARVE_RUN_PRELOAD_RELATIVE, "../lib/libcarve_preload.so",
                                      "../lib/x86_64-linux-gnu/libcarve_preload.so",
                                      "../lib/aarch64-linux-gnu/libcarve_preload.so", "../lib64/libcarve_preload.so",
                                      "../lib/preload/libcarve_preload.so"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char path[2 * PATH_MAX];
        if (rel[i][0] == '/')
            snprintf(path, sizeof(path), "%s", rel[i]);
        else
            snprintf(path, sizeof(path), "%s/%s", self, rel[i]);
        char real[PATH_MAX];
        if (realpath(path, real) && access(real, R_OK) == 0) {
            snprintf(out, len, "%s", real);
            return 0;
        }
    }
    return -1;
}

/* A size for key, checked by the library's own parser: the message names
 * the option it came from. */
static const char *size_value(const char *v, const char *key, const char *opt) {
    char text[256];
    carve_config probe;
    carve_config_init(&probe);
    if ((size_t)snprintf(text, sizeof(text), "%s=%s", key, token(v, opt)) >= sizeof(text) ||
        carve_config_parse(&probe, text) != CARVE_OK)
        usage_error("bad value '%s' for %s: a size such as 8GiB, 1.5GB or 123 (bytes), or a fraction of the "
                    "device's memory such as 0.5", v, opt);
    return v;
}

/* Whether execvp would find name: a path to an executable, or a name found
 * in PATH. */
static int is_program(const char *name) {
    if (strchr(name, '/'))
        return access(name, X_OK) == 0;
    const char *dirs = getenv("PATH");
    for (const char *p = dirs ? dirs : ""; *p;) {
        size_t n = strcspn(p, ":");
        char full[PATH_MAX];
        if (n && (size_t)snprintf(full, sizeof(full), "%.*s/%s", (int)n, p, name) < sizeof(full)) {
            struct stat sb;
            if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode) && access(full, X_OK) == 0)
                return 1;
        }
        p += n + (p[n] == ':');
    }
    return 0;
}

/* The program word right after a bare --report (its optional file goes
 * after '=') was most likely meant as the report's file: refuse it when it
 * names no program, or a .json file. An empty --report= is refused too. */
static void check_report(const char *report, int argc, char **argv) {
    if (report && !*report)
        usage_error("--report= needs a file name after '=' (--report alone prints on stderr)");
    const char *before = optind > 1 ? argv[optind - 1] : "";
    int bare = strncmp(before, "--r", 3) == 0 && !strchr(before, '=') && !strncmp("--report", before, strlen(before));
    if (!bare || optind >= argc)
        return;
    const char *prog = argv[optind];
    size_t n = strlen(prog);
    int json = n > 5 && !strcmp(prog + n - 5, ".json");
    if (json || !is_program(prog))
        usage_error("'%s' follows --report, so it would run as the program; to write the report into it, "
                    "give --report=%s (and the program after --)", prog, prog);
}

/* The directory an output file goes into must exist and be writable: the
 * program would run to its end before the file could not be written. */
static void check_output(const char *file, const char *opt) {
    if (!file || !strcmp(file, "-"))
        return;
    char dir[PATH_MAX];
    const char *slash = strrchr(file, '/');
    if ((size_t)snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - file) + 1 : 1, slash ? file : ".") >=
        sizeof(dir))
        usage_error("%s '%s': the path is too long", opt, file);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        usage_error("%s '%s': cannot write into %s: %s", opt, file, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        usage_error("%s '%s': %s is not a directory", opt, file, dir);
    if (access(dir, W_OK | X_OK) != 0)
        usage_error("%s '%s': cannot write into %s: %s", opt, file, dir, strerror(errno));
    if (stat(file, &sb) == 0 && S_ISDIR(sb.st_mode))
        usage_error("%s '%s' is a directory", opt, file);
    if (stat(file, &sb) == 0 && access(file, W_OK) != 0)
        usage_error("%s '%s' cannot be written: %s", opt, file, strerror(errno));
}

/* Whether the file f holds a 64-bit ELF shared object that defines the
 * symbol name in its dynamic symbol table: 1, 0, or -1 when it is no such
 * object. */
static int defines_symbol(FILE *f, const char *name) {
    Elf64_Ehdr eh;
    if (fread(&eh, sizeof(eh), 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum == 0 || eh.e_shnum > 4096)
        return -1;
    Elf64_Shdr *sh = malloc(eh.e_shnum * sizeof(*sh));
    int found = 0;
    if (!sh || fseek(f, (long)eh.e_shoff, SEEK_SET) != 0 || fread(sh, sizeof(*sh), eh.e_shnum, f) != eh.e_shnum) {
        free(sh);
        return -1;
    }
    for (unsigned i = 0; i < eh.e_shnum && !found; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym))
            continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        size_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
        char *strtab = str->sh_size < ((size_t)64 << 20) ? malloc(str->sh_size + 1) : NULL;
        Elf64_Sym *syms = nsym < ((size_t)1 << 22) ? malloc(nsym * sizeof(*syms) + 1) : NULL;
        if (strtab && syms && fseek(f, (long)str->sh_offset, SEEK_SET) == 0 &&
            fread(strtab, 1, str->sh_size, f) == str->sh_size && fseek(f, (long)sh[i].sh_offset, SEEK_SET) == 0 &&
            fread(syms, sizeof(*syms), nsym, f) == nsym) {
            strtab[str->sh_size] = '\0';
            for (size_t k = 0; k < nsym && !found; k++)
                found = syms[k].st_name < str->sh_size && syms[k].st_shndx != SHN_UNDEF &&
                        !strcmp(strtab + syms[k].st_name, name);
        }
        free(strtab);
        free(syms);
    }
    free(sh);
    return found;
}

/* The interposer must be a shared library that serves cuMemAlloc: a
 * directory or any other file in LD_PRELOAD would leave the program
 * running without carve. path becomes absolute (the loader looks a name
 * without a slash up in the library path, not here). */
static void check_interposer(char *path, size_t len, const char *given_by) {
    char real[PATH_MAX];
    const char *by = given_by ? given_by : "the interposer";
    struct stat sb;
    if (!realpath(path, real) || stat(real, &sb) != 0)
        usage_error("%s '%s' cannot be read: %s", by, path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        usage_error("%s '%s' is not a file (give the path of libcarve_preload.so)", by, path);
    if (strpbrk(real, ": "))
        usage_error("%s '%s': LD_PRELOAD cannot carry a path with ':' or a space", by, real);
    FILE *f = fopen(real, "rb");
    if (!f)
        usage_error("%s '%s' cannot be read: %s", by, path, strerror(errno));
    int has = defines_symbol(f, "cuMemAlloc_v2");
    fclose(f);
    if (has < 0)
        usage_error("%s '%s' is not a shared library (give the path of libcarve_preload.so)", by, path);
    if (has == 0)
        usage_error("%s '%s' is not carve's interposer: it does not define cuMemAlloc_v2", by, path);
    snprintf(path, len, "%s", real);
}

int main(int argc, char **argv) {
    enum { O_LIMIT = 256, O_DEVLIMIT, O_INITIAL, O_GROWTH, O_NOGROWTH, O_MODE, O_CONF, O_TRACE, O_REPORT, O_SVG,
           O_PRELOAD, O_PRINTENV, O_FAILEVERY, O_FAILAT, O_NOORDERED };
    static const struct option longs[] = {
        {"limit", required_argument, NULL, O_LIMIT},       {"device-limit", required_argument, NULL, O_DEVLIMIT},
        {"initial", required_argument, NULL, O_INITIAL},   {"growth", no_argument, NULL, O_GROWTH},
        {"no-growth", no_argument, NULL, O_NOGROWTH},      {"mode", required_argument, NULL, O_MODE},
        {"conf", required_argument, NULL, O_CONF},         {"trace", required_argument, NULL, O_TRACE},
        {"report", optional_argument, NULL, O_REPORT},     {"svg", required_argument, NULL, O_SVG},
        {"preload", required_argument, NULL, O_PRELOAD},   {"print-env", no_argument, NULL, O_PRINTENV},
        {"fail-every", required_argument, NULL, O_FAILEVERY}, {"fail-at", required_argument, NULL, O_FAILAT},
        {"no-ordered-reuse", no_argument, NULL, O_NOORDERED},
        {"quiet", no_argument, NULL, 'q'},                 {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},               {NULL, 0, NULL, 0},
    };
    conf all = {{0}, 0}, devs = {{0}, 0};
    const char *trace = NULL, *report = NULL, *svg = NULL, *preload = NULL, *fail_every = NULL, *fail_at = NULL;
    int quiet = 0, print_env = 0, growth_set = 0, no_ordered = 0;
    int devices[64] = {0};
    opterr = 0;
    int c;
    /* "+": stop at the first non-option, which is the program. */
    while ((c = getopt_long(argc, argv, "+qhV", longs, NULL)) != -1) {
        switch (c) {
        case O_LIMIT: conf_add(&all, ",", "limit=%s", size_value(optarg, "limit", "--limit")); break;
        case O_INITIAL: conf_add(&all, ",", "initial=%s", size_value(optarg, "initial", "--initial")); break;
        case O_GROWTH:
        case O_NOGROWTH:
            if (growth_set++)
                usage_error("--growth and --no-growth: give one of them, once");
            conf_add(&all, ",", "growth=%d", c == O_GROWTH);
            break;
        case O_MODE:
            if (strcmp(optarg, "default") && strcmp(optarg, "vmm") && strcmp(optarg, "segments"))
                usage_error("--mode takes default, vmm or segments, not '%s'", optarg);
            conf_add(&all, ",", "vmm=%s",
                     strcmp(optarg, "vmm") == 0 ? "1" : strcmp(optarg, "segments") == 0 ? "0" : "auto");
            break;
        case O_CONF: {
            carve_config probe;
            carve_config_init(&probe);
            if (strchr(optarg, ';'))
                usage_error("--conf takes keys for every device (use --device-limit for one device)");
            if (!*optarg || carve_config_parse(&probe, optarg) != CARVE_OK)
                usage_error("bad --conf '%s': %s", optarg, *optarg ? carve_last_error(NULL) : "give key=value pairs");
            conf_add(&all, ",", "%s", optarg);
            break;
        }
        case O_DEVLIMIT: {
            char *eq = strchr(optarg, '=');
            char *end;
            errno = 0;
            long d = strtol(optarg, &end, 10);
            if (!eq || end != eq || end == optarg || errno || d < 0 || d > 63)
                usage_error("--device-limit takes N=SIZE with a device number 0..63, e.g. 1=2GiB, not '%s'", optarg);
            if (devices[d]++)
                usage_error("--device-limit for device %ld given twice", d);
            conf_add(&devs, ";", "device%ld:limit=%s", d, size_value(eq + 1, "limit", "--device-limit"));
            break;
        }
        case O_TRACE: trace = optarg; break;
        case O_REPORT: report = optarg ? optarg : "-"; break;
        case O_SVG: svg = optarg; break;
        case O_PRELOAD: preload = optarg; break;
        case O_FAILEVERY:
            if (fail_every)
                usage_error("--fail-every given twice");
            fail_every = call_count(optarg, "--fail-every");
            break;
        case O_FAILAT:
            if (fail_at)
                usage_error("--fail-at given twice");
            fail_at = call_count(optarg, "--fail-at");
            break;
        case O_PRINTENV: print_env = 1; break;
        case O_NOORDERED: no_ordered = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("carve-run %s\n", carve_version()); return 0;
        default: cli_bad_option("carve-run", argv, c, longs);
        }
    }
    if (optind == argc && !print_env)
        usage_error("no program given (carve-run [options] -- PROGRAM [ARGS...])");
    static const char *const once[] = {"limit", "initial", "mode", "trace", "report", "svg", "preload", NULL};
    cli_once("carve-run", optind, argv, "+qhV", longs, once);
    check_report(report, argc, argv);
    if (trace && !*trace)
        usage_error("--trace needs a file name");
    if (svg && !*svg)
        usage_error("--svg needs a file name");
    /* Faults asked for in the environment are checked as well (the options
     * take their place). */
    static const char *const fault_vars[] = {"CARVE_RUN_FAIL_EVERY", "CARVE_RUN_FAIL_AT"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = getenv(fault_vars[i]);
        if (v && *v && !(i == 0 ? fail_every : fail_at))
            call_count(v, fault_vars[i]);
    }

    /* The whole configuration: what the environment already says, then the
     * options, checked for every device they name. */
    conf full = {{0}, 0};
    const char *env_conf = getenv("CARVE_CONF");
    if (env_conf && *env_conf)
        conf_add(&full, ";", "%s", env_conf);
    if (all.len)
        conf_add(&full, ";", "%s", all.text);
    if (devs.len)
        conf_add(&full, ";", "%s", devs.text);
    for (int d = 0; d < 64; d++) {
        if (d != 0 && !devices[d])
            continue;
        carve_config cfg;
        if (carve_conf_parse(full.text, d, &cfg) != CARVE_OK)
            usage_error("%s%s", carve_last_error(NULL),
                        env_conf && *env_conf ? " (CARVE_CONF from the environment included)" : "");
        /* A configuration whose arena could hold nothing would leave every
         * allocation to the driver, uncapped: refuse it here. */
        char where[16] = "";
        if (d)
            snprintf(where, sizeof(where), "device %d: ", d);
        if (carve_config_check(&cfg) != CARVE_OK)
            usage_error("%s%s, so every allocation would go to the driver, uncapped%s", where, carve_last_error(NULL),
                        env_conf && *env_conf ? " (CARVE_CONF from the environment included)" : "");
    }

    if (!print_env) {
        check_output(trace, "--trace");
        check_output(report, "--report");
        check_output(svg, "--svg");
        /* The same files named in the environment, where no option replaces them. */
        static const char *const file_vars[] = {"CARVE_RUN_TRACE", "CARVE_RUN_REPORT", "CARVE_RUN_SVG"};
        const char *given[] = {trace, report, svg};
        for (size_t i = 0; i < 3; i++) {
            const char *v = getenv(file_vars[i]);
            if (!given[i] && v && *v)
                check_output(v, file_vars[i]);
        }
    }

    char path[PATH_MAX];
    const char *env_preload = getenv("CARVE_PRELOAD");
    if (preload)
        snprintf(path, sizeof(path), "%s", preload);
    else if (find_preload(path, sizeof(path)) != 0) {
        if (env_preload && *env_preload)
            usage_error("CARVE_PRELOAD names '%s', which cannot be read: %s", env_preload, strerror(errno));
        usage_error("cannot find libcarve_preload.so beside %s; give it with --preload PATH or CARVE_PRELOAD",
                    argv[0]);
    }
    check_interposer(path, sizeof(path), preload ? "--preload" : env_preload && *env_preload ? "CARVE_PRELOAD" : NULL);
    /* LD_PRELOAD whole, however long what was there already is. */
    const char *old = getenv("LD_PRELOAD");
    size_t ld_len = strlen(path) + (old ? strlen(old) : 0) + 2;
    char *ld = malloc(ld_len);
    if (!ld) {
        fprintf(stderr, "carve-run: host memory exhausted\n");
        return 1;
    }
    snprintf(ld, ld_len, "%s%s%s", path, old && *old ? ":" : "", old && *old ? old : "");

    struct {
        const char *name, *value;
    } vars[] = {
        {"LD_PRELOAD", ld},          {"CARVE_CONF", full.len ? full.text : NULL},
        {"CARVE_RUN_TRACE", trace},  {"CARVE_RUN_REPORT", report},
        {"CARVE_RUN_SVG", svg},      {"CARVE_RUN_QUIET", quiet ? "1" : NULL},
        {"CARVE_RUN_FAIL_EVERY", fail_every}, {"CARVE_RUN_FAIL_AT", fail_at},
        {"CARVE_RUN_ORDERED", no_ordered ? "0" : NULL},
    };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        if (!vars[i].value)
            continue;
        if (print_env)
            printf("%s=%s\n", vars[i].name, vars[i].value);
        else if (setenv(vars[i].name, vars[i].value, 1) != 0) {
            fprintf(stderr, "carve-run: cannot set %s: %s\n", vars[i].name, strerror(errno));
            return 1;
        }
    }
    if (print_env)
        return 0;
    /* The program runs under this very pid: it is the run's root process,
     * which writes the files under their given names (children add .<pid>). */
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    setenv("CARVE_RUN_ROOT_PID", pid, 1);
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "carve-run: cannot run %s: %s\n", argv[optind], strerror(errno));
    return 127;
}
