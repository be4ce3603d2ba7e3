/* header_test.c — include/carve.h and carve_kernels.h compile alone (C99). */
#include "carve.h"
#include "carve_kernels.h"

int main(void) {
    carve_config c;
    carve_config_init(&c);
    return carve_status_str(CARVE_OK)[0] == 'C' && c.growth == 1 ? 0 : 1;
}
