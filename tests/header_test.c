/* header_test.c — one public header (HEADER, set by the build) compiles alone
 * as C99 with -pedantic-errors, and links. Built once per header; carve.h
 * comes after it, for the headers that do not include it (carve_run.h). */
#include HEADER
#include "carve.h"

int main(void) {
    carve_config c;
    carve_config_init(&c);
    return carve_status_str(CARVE_OK)[0] == 'C' && c.growth == 1 ? 0 : 1;
}
