// header_test.cpp — include/carve.h and carve_kernels.h compile alone as C++.
#include "carve.h"
#include "carve_kernels.h"

int main() {
    carve_config c;
    carve_config_init(&c);
    carve_stream s = nullptr;
    return (carve_status_str(CARVE_OK)[0] == 'C' && c.growth == 1 && s == nullptr) ? 0 : 1;
}
