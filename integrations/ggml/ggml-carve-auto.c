/*
 * ggml-carve-auto.c — the adapter without a line of the program changed:
 * linked into a ggml program (as an object, so that it is kept), it calls
 * ggml_carve_init before main with the configuration in GGML_CARVE_CONF
 * (CARVE_CONF's syntax; unset: carve's defaults), and at exit writes
 * ggml_carve_report to the file GGML_CARVE_REPORT names ("-": standard
 * error). A configuration carve refuses ends the program with status 2
 * before it starts, with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-carve.h"

__attribute__((constructor)) static void ggml_carve_auto_init(void) {
    const char *conf = getenv("GGML_CARVE_CONF");
    if (ggml_carve_init(conf ? conf : "") != 0) {
        fprintf(stderr, "ggml-carve: GGML_CARVE_CONF: %s\n", ggml_carve_error());
        exit(2);
    }
}

__attribute__((destructor)) static void ggml_carve_auto_report(void) {
    const char *where = getenv("GGML_CARVE_REPORT");
    if (!where || !*where)
        return;
    FILE *f = strcmp(where, "-") == 0 ? stderr : fopen(where, "w");
    if (!f) {
        fprintf(stderr, "ggml-carve: cannot write the report to %s\n", where);
        return;
    }
    ggml_carve_report(f);
    if (f != stderr)
        fclose(f);
}
