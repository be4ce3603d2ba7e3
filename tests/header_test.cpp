// header_test.cpp — one public header (HEADER, set by the build) compiles
// alone as C++ with -pedantic-errors, and links. Built once per header;
// carve.h comes after it, for the headers that do not include it
// (carve_run.h).
#include HEADER
#include "carve.h"

int main() {
    carve_config c;
    carve_config_init(&c);
    carve_stream s = nullptr;
    return (carve_status_str(CARVE_OK)[0] == 'C' && c.growth == 1 && s == nullptr) ? 0 : 1;
}
