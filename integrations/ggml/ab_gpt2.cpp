/*
 * ab_gpt2.cpp — carve-run's effect on ggml's GPT-2 tokens/s, measured inside
 * ONE process: ggml's examples/gpt-2/main-backend.cpp, unmodified, compiled
 * with -Dmain=gpt2_backend_main and called here many times, carve serving
 * the process's allocations in one arm and the CUDA driver in the other
 * (carve-run's measurement switch, include/carve_run.h).
 *
 * Why one process: the same program's tokens/s differs by 10-17% from
 * process to process on an H100, whatever is pinned; a 2% check between
 * processes would need hundreds of runs. Inside one process the arms share
 * everything but who serves the memory, so the comparison is paired: the
 * arms alternate in pairs of rounds, ABBA (plain then carve, carve then
 * plain, ...), so that drift hits both alike, and each pair gives one ratio
 * carve / plain; the figure is the median of those ratios with a rank
 * interval (ab_stats.c).
 *
 * A round is one arm's two calls, as measure.py defines the speeds: one
 * generating 1 token (prompt tokens/s = prompt tokens / its predict time)
 * and one generating N + 1 (generation tokens/s = N / the difference of the
 * two predict times). Each call loads the model and frees everything it
 * made, so every round's allocations are its own arm's. Every call's stdout
 * and stderr are captured (a temporary file behind descriptors 1 and 2),
 * ggml's own "predict time" is read from it, and every call must print the
 * same tokens as the first call of its kind (greedy decoding).
 *
 * main-backend.cpp called again in one process: its state is in main's
 * locals and freed before main returns, except a static graph buffer of
 * fixed size (reused) and the KV cache's ggml context, which it never frees
 * (a little host memory per call). ggml's CUDA backend keeps its device
 * table across calls, as it would in any program that makes two backends.
 *
 * Without carve-run (no switch in the process) it refuses to run unless
 * --no-switch is given: then both arms are the same (an A/A run, for a smoke
 * test of a CPU build and of the statistics).
 *
 * Usage: ab_gpt2 [--pairs N] [--warmup N] [--gen N] [--json FILE]
 *                [--text FILE] [--keep DIR] [--no-switch] -- GPT2_ARGS...
 *   GPT2_ARGS: gpt-2-backend's own arguments without -n (-m MODEL -p PROMPT
 *   -s 42 --top_k 1 ...); --pairs (default 24) pairs after --warmup (1)
 *   pairs that are not counted; --gen tokens generated (256); --keep writes
 *   every call's output there. Exit 0 when every call ran and printed the
 *   same tokens, 1 otherwise, 2 on bad usage.
 */
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include "ab_stats.h"
#include "carve_run.h"

int gpt2_backend_main(int argc, char **argv);

namespace {

struct options {
    int pairs = 24, warmup = 1, gen = 256;
    std::string json, text, keep;
    bool no_switch = false;
    std::vector<std::string> gpt2;
};

struct call {
    int rc = -1;
    double predict_ms = -1;
    long prompt_tokens = -1;
    std::string text;
    bool parsed = false;
};

struct round_result {
    int pair;
    bool carve;
    call one, full;
    double prompt_tps = NAN, gen_tps = NAN;
};

carve_run_serve_fn serve_fn;
int calls_made;
/* While a call runs: the program's own descriptors 1 and 2, and the file
 * behind them (for a call that ends the process: gpt-2-backend exits on a
 * bad argument). */
int saved_out = -1, saved_err = -1;
FILE *capturing;

void call_ended_process() {
    if (!capturing)
        return;
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    fprintf(stderr, "ab_gpt2: gpt-2-backend ended the process during call %d; its output ends:\n", calls_made + 1);
    long end = ftell(capturing);
    fseek(capturing, end > 3000 ? end - 3000 : 0, SEEK_SET);
    char buf[3001];
    size_t got = fread(buf, 1, sizeof(buf) - 1, capturing);
    buf[got] = 0;
    fprintf(stderr, "%s\n", buf);
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One call of gpt-2-backend generating n tokens, its output captured. */
call run_gpt2(const options &o, int n, const char *tag) {
    call c;
    std::vector<std::string> args = {"gpt-2-backend"};
    args.insert(args.end(), o.gpt2.begin(), o.gpt2.end());
    args.push_back("-n");
    args.push_back(std::to_string(n));
    std::vector<char *> argv;
    for (auto &a : args)
        argv.push_back(&a[0]);
    argv.push_back(nullptr);

    FILE *cap = tmpfile();
    if (!cap) {
        fprintf(stderr, "ab_gpt2: no temporary file for the output: %s\n", strerror(errno));
        return c;
    }
    fflush(stdout);
    fflush(stderr);
    saved_out = dup(1);
    saved_err = dup(2);
    dup2(fileno(cap), 1);
    dup2(fileno(cap), 2);
    capturing = cap;
    c.rc = gpt2_backend_main((int)args.size(), argv.data());
    fflush(stdout);
    fflush(stderr);
    capturing = nullptr;
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    calls_made++;

    std::string body;
    rewind(cap);
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), cap)) > 0)
        body.append(buf, got);
    fclose(cap);
    if (!o.keep.empty()) {
        std::string path = o.keep + "/" + std::to_string(1000 + calls_made).substr(1) + "-" + tag + "-n" +
                           std::to_string(n) + ".log";
        if (FILE *f = fopen(path.c_str(), "w")) {
            fwrite(body.data(), 1, body.size(), f);
            fclose(f);
        }
    }
    ab_output parsed;
    c.parsed = ab_parse(body.c_str(), &parsed) == 0 && c.rc == 0;
    c.predict_ms = parsed.predict_ms;
    c.prompt_tokens = parsed.prompt_tokens;
    if (parsed.text)
        c.text.assign(parsed.text, parsed.text_len);
    if (!c.parsed) {
        size_t tail = body.size() > 3000 ? body.size() - 3000 : 0;
        fprintf(stderr, "ab_gpt2: call %d (%s, -n %d) returned %d without ggml's figures; its output ends:\n%s\n",
                calls_made, tag, n, c.rc, body.c_str() + tail);
    }
    return c;
}

bool set_arm(bool carve) {
    if (!serve_fn)
        return true;
    return serve_fn(carve ? 1 : 0) >= 0;
}

int number(const char *flag, const char *v, int lo) {
    char *end = nullptr;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > 100000) {
        fprintf(stderr, "ab_gpt2: %s needs a whole number from %d\n", flag, lo);
        exit(2);
    }
    return (int)x;
}

options parse(int argc, char **argv) {
    options o;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(a, "--pairs"))
            o.pairs = number(a, v, 1), i++;
        else if (!strcmp(a, "--warmup"))
            o.warmup = number(a, v, 0), i++;
        else if (!strcmp(a, "--gen"))
            o.gen = number(a, v, 1), i++;
        else if (!strcmp(a, "--json") && v)
            o.json = v, i++;
        else if (!strcmp(a, "--text") && v)
            o.text = v, i++;
        else if (!strcmp(a, "--keep") && v)
            o.keep = v, i++;
        else if (!strcmp(a, "--no-switch"))
            o.no_switch = true;
        else {
            fprintf(stderr, "ab_gpt2: unknown or incomplete option '%s' (usage: ab_gpt2 [--pairs N] [--warmup N] "
                            "[--gen N] [--json FILE] [--text FILE] [--keep DIR] [--no-switch] -- GPT2_ARGS...)\n", a);
            exit(2);
        }
    }
    for (i++; i < argc; i++)
        o.gpt2.push_back(argv[i]);
    if (o.gpt2.empty()) {
        fprintf(stderr, "ab_gpt2: give gpt-2-backend's arguments after --\n");
        exit(2);
    }
    return o;
}

struct figure {
    double plain_median = NAN, carve_median = NAN, ratio = NAN, lo = NAN, hi = NAN, coverage = 0;
    size_t n = 0;
};

figure sum_up(const std::vector<round_result> &rounds, int pairs, bool gen, std::vector<double> &ratios) {
    figure f;
    std::vector<double> plain, carve;
    ratios.assign(pairs, NAN);
    for (int p = 0; p < pairs; p++) {
        double a = NAN, b = NAN;
        for (const auto &r : rounds)
            if (r.pair == p)
                (r.carve ? b : a) = gen ? r.gen_tps : r.prompt_tps;
        if (!std::isnan(a))
            plain.push_back(a);
        if (!std::isnan(b))
            carve.push_back(b);
        if (!std::isnan(a) && !std::isnan(b) && a > 0)
            ratios[p] = b / a;
    }
    std::vector<double> ok;
    for (double r : ratios)
        if (!std::isnan(r))
            ok.push_back(r);
    f.n = ok.size();
    f.plain_median = ab_median(plain.data(), plain.size());
    f.carve_median = ab_median(carve.data(), carve.size());
    f.ratio = ab_median(ok.data(), ok.size());
    ab_median_interval(ok.data(), ok.size(), 0.95, &f.lo, &f.hi, &f.coverage);
    return f;
}

std::string num(double x, int digits) {
    if (std::isnan(x))
        return "null";
    char b[64];
    snprintf(b, sizeof(b), "%.*f", digits, x);
    return b;
}

std::string quoted(const std::string &s) {
    std::string q = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\')
            q += '\\', q += ch;
        else if ((unsigned char)ch < 0x20) {
            char b[8];
            snprintf(b, sizeof(b), "\\u%04x", ch);
            q += b;
        } else
            q += ch;
    }
    return q + "\"";
}

std::string figure_json(const figure &f) {
    return "{\"plain_median_tps\": " + num(f.plain_median, 3) + ", \"carve_median_tps\": " + num(f.carve_median, 3) +
           ", \"median_ratio\": " + num(f.ratio, 6) + ", \"lo\": " + num(f.lo, 6) + ", \"hi\": " + num(f.hi, 6) +
           ", \"coverage\": " + num(f.coverage, 4) + ", \"n\": " + std::to_string(f.n) + "}";
}

std::string figure_text(const char *what, const figure &f) {
    char b[512];
    if (std::isnan(f.lo))
        snprintf(b, sizeof(b), "%s: carve/plain median ratio %s over %zu pairs (too few pairs for an interval); "
                               "medians carve %s, plain %s\n",
                 what, num(f.ratio, 4).c_str(), f.n, num(f.carve_median, 1).c_str(), num(f.plain_median, 1).c_str());
    else
        snprintf(b, sizeof(b), "%s: carve/plain median ratio %.4f, %.1f%% interval %.4f-%.4f over %zu pairs; "
                               "medians carve %.1f, plain %.1f\n",
                 what, f.ratio, 100 * f.coverage, f.lo, f.hi, f.n, f.carve_median, f.plain_median);
    return b;
}

} // namespace

int main(int argc, char **argv) {
    options o = parse(argc, argv);
    void *sym = dlsym(RTLD_DEFAULT, CARVE_RUN_SERVE_SYMBOL);
    memcpy(&serve_fn, &sym, sizeof(sym));
    if (!serve_fn && !o.no_switch) {
        fprintf(stderr, "ab_gpt2: no %s in this process: run it under carve-run (or give --no-switch for an A/A "
                        "run)\n", CARVE_RUN_SERVE_SYMBOL);
        return 2;
    }
    if (o.no_switch)
        serve_fn = nullptr;
    atexit(call_ended_process);
    double t0 = now_s();
    std::vector<round_result> rounds;
    bool ok = true, same = true;
    std::string first_one, first_full;
    bool have_first = false;
    long prompt_tokens = -1;
    int bad_rounds = 0;
    for (int p = -o.warmup; p < o.pairs && ok; p++) {
        int order = ((p % 2) + 2) % 2; /* 0: plain then carve; 1: carve then plain */
        for (int k = 0; k < 2 && ok; k++) {
            bool carve = (k == 0) == (order == 1);
            if (!set_arm(carve)) {
                fprintf(stderr, "ab_gpt2: carve-run's switch refused (carve serves nothing in this process)\n");
                ok = false;
                break;
            }
            round_result r;
            r.pair = p;
            r.carve = carve;
            r.one = run_gpt2(o, 1, carve ? "carve" : "plain");
            r.full = run_gpt2(o, o.gen + 1, carve ? "carve" : "plain");
            if (!r.one.parsed || !r.full.parsed) {
                ok = false;
                break;
            }
            if (!have_first) {
                have_first = true;
                first_one = r.one.text;
                first_full = r.full.text;
                prompt_tokens = r.one.prompt_tokens;
            }
            if (r.one.text != first_one || r.full.text != first_full) {
                same = false;
                fprintf(stderr, "ab_gpt2: pair %d (%s) printed other tokens than the first call\n", p,
                        carve ? "carve" : "plain");
            }
            if (r.one.predict_ms > 0)
                r.prompt_tps = (double)r.one.prompt_tokens / (r.one.predict_ms / 1e3);
            if (r.full.predict_ms > r.one.predict_ms)
                r.gen_tps = o.gen / ((r.full.predict_ms - r.one.predict_ms) / 1e3);
            else
                bad_rounds++;
            if (p >= 0)
                rounds.push_back(r);
        }
    }
    set_arm(true);
    double seconds = now_s() - t0;

    std::vector<double> prompt_ratios, gen_ratios;
    figure fp = sum_up(rounds, o.pairs, false, prompt_ratios);
    figure fg = sum_up(rounds, o.pairs, true, gen_ratios);

    std::string text;
    char line[512];
    snprintf(line, sizeof(line),
             "ab_gpt2: ggml's gpt-2-backend (unmodified) called %d times in one process: %d pairs of rounds (ABBA) "
             "after %d warm-up pair%s, %d tokens generated, prompt %ld tokens; switch %s\n",
             calls_made, o.pairs, o.warmup, o.warmup == 1 ? "" : "s", o.gen, prompt_tokens,
             serve_fn ? "carve_run_serve (carve / the driver)" : "none (A/A: both arms the same)");
    text += line;
    text += "pair arm    prompt_ms    full_ms  prompt_tok/s  gen_tok/s\n";
    for (const auto &r : rounds) {
        snprintf(line, sizeof(line), "%4d %-5s %10.2f %10.2f %13.1f %10.1f\n", r.pair, r.carve ? "carve" : "plain",
                 r.one.predict_ms, r.full.predict_ms, r.prompt_tps, r.gen_tps);
        text += line;
    }
    text += figure_text("prompt tokens/s", fp);
    text += figure_text("generation tokens/s", fg);
    snprintf(line, sizeof(line), "tokens: %s; %d rounds without a generation time; %.1f s\n",
             !ok ? "a call failed" : same ? "the same in every call" : "DIFFERENT between calls", bad_rounds,
             seconds);
    text += line;
    fputs(text.c_str(), stdout);
    fflush(stdout);

    std::string js = "{\"ab_gpt2\": 1, \"switch\": " + std::string(serve_fn ? "true" : "false") +
                     ", \"pairs\": " + std::to_string(o.pairs) + ", \"warmup\": " + std::to_string(o.warmup) +
                     ", \"gen\": " + std::to_string(o.gen) + ", \"prompt_tokens\": " + std::to_string(prompt_tokens) +
                     ", \"calls\": " + std::to_string(calls_made) + ", \"complete\": " + (ok ? "true" : "false") +
                     ", \"same_tokens\": " + (same ? "true" : "false") + ", \"seconds\": " + num(seconds, 3) +
                     ", \"bad_rounds\": " + std::to_string(bad_rounds) +
                     ", \"text_sample\": " + quoted(first_full.substr(0, 200)) + ",\n \"rounds\": [";
    for (size_t i = 0; i < rounds.size(); i++) {
        const auto &r = rounds[i];
        js += std::string(i ? ",\n  " : "\n  ") + "{\"pair\": " + std::to_string(r.pair) + ", \"arm\": \"" +
              (r.carve ? "carve" : "plain") + "\", \"one_ms\": " + num(r.one.predict_ms, 3) + ", \"full_ms\": " +
              num(r.full.predict_ms, 3) + ", \"prompt_tps\": " + num(r.prompt_tps, 3) + ", \"gen_tps\": " +
              num(r.gen_tps, 3) + "}";
    }
    js += "],\n \"pair_ratios\": [";
    for (int p = 0; p < o.pairs; p++)
        js += std::string(p ? ", " : "") + "{\"pair\": " + std::to_string(p) + ", \"prompt\": " +
              num(prompt_ratios[p], 6) + ", \"gen\": " + num(gen_ratios[p], 6) + "}";
    js += "],\n \"prompt\": " + figure_json(fp) + ",\n \"gen\": " + figure_json(fg) + "}\n";
    for (const auto &pair : {std::make_pair(o.json, js), std::make_pair(o.text, text)}) {
        if (pair.first.empty())
            continue;
        FILE *f = fopen(pair.first.c_str(), "w");
        if (!f || fputs(pair.second.c_str(), f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "ab_gpt2: cannot write %s\n", pair.first.c_str());
            ok = false;
        }
    }
    return ok && same ? 0 : 1;
}
